package sequencer

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/heap"
)

// storedNode is node key (fe5, say) of tenant number tn, one of 8 nodes,
// as the API server stores it after records rollouts: its defaulted lists,
// the webhook's and the sequencer's annotations, the sequencer's condition
// and the Express operator's, and the rollout-history the webhook keeps
// (up to RolloutHistoryLength records). Its target hashes are its own, its
// rollout-id and rendered nodes its tenant's.
func storedNode(tb testing.TB, tn int, key string, records int) []byte {
	tb.Helper()
	tenant := fmt.Sprintf("tenant-%04d", tn)
	node := fmt.Sprintf("%d/%s", tn, key)
	hash := func(of string) string { return fmt.Sprintf("%064x", sha256.Sum256([]byte(of))) }
	rolloutID := hash(tenant)[:40]
	at := func(s int) string { return time.Date(2026, 12, 2, 10, 0, s, 0, time.UTC).Format(time.RFC3339) }
	prerequisites := func(keys ...string) []v2alpha1.Prerequisite {
		var out []v2alpha1.Prerequisite
		for _, k := range keys {
			kind := v2alpha1.KindFrontend
			if k == "be" {
				kind = v2alpha1.KindBackend
			}
			out = append(out, v2alpha1.Prerequisite{ExpressNode: tenant + "-" + k, Kind: kind, PodConditionType: "Ready", ConditionStatus: "True"})
		}
		return out
	}
	var rendered []string
	for _, k := range tenantKeys {
		rendered = append(rendered, tenant+"-"+k)
	}
	var history []map[string]any
	for i := range records {
		history = append(history, map[string]any{
			"target": hash(fmt.Sprint(node, i)), "rolloutID": hash(fmt.Sprint(tenant, i))[:40], "gated": at(1), "released": at(2), "ready": at(3), "replaced": at(4),
			"converged": true, "after": []string{tenant + "-fe1", tenant + "-fe2", tenant + "-be", tenant + "-fe3", tenant + "-fe4"},
		})
	}
	data, err := json.Marshal(history)
	if err != nil {
		tb.Fatal(err)
	}
	ann := map[string]string{
		v2alpha1.AnnotationTargetHash: hash(node), v2alpha1.AnnotationReleasedTarget: hash(node),
		v2alpha1.AnnotationDefaultedPrerequisites: "true", v2alpha1.AnnotationReleasedGeneration: "7",
		v2alpha1.AnnotationReleasedAfter:       `{"` + tenant + `-be":"` + uid(tn, "be") + `/6","` + tenant + `-fe1":"` + uid(tn, "fe1") + `/6"}`,
		v2alpha1.AnnotationReleasedSetRevision: uid(tn, key+"/set") + "/" + tenant + "-" + key + "-6d9f8c7b5", v2alpha1.AnnotationReleasedAt: at(2),
		v2alpha1.AnnotationTargetRolloutID: rolloutID, v2alpha1.AnnotationRolloutID: rolloutID,
		v2alpha1.AnnotationRolloutIDChangedAt: at(1), v2alpha1.AnnotationTargetChangedAt: at(1), v2alpha1.AnnotationTargetChangesBeganAt: at(1),
		v2alpha1.AnnotationRenderedNodes: strings.Join(rendered, ","),
	}
	if records > 0 {
		ann[v2alpha1.AnnotationRolloutHistory] = string(data)
	}
	n := &v2alpha1.Frontend{
		TypeMeta: metav1.TypeMeta{APIVersion: v2alpha1.GroupVersion.String(), Kind: v2alpha1.KindFrontend},
		ObjectMeta: metav1.ObjectMeta{Name: tenant + "-" + key, Namespace: tenant, UID: types.UID(uid(tn, key)), ResourceVersion: fmt.Sprint(1234567 + tn),
			Generation: 7, CreationTimestamp: metav1.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC), Annotations: ann,
			Labels: map[string]string{"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/instance": tenant}},
		Spec: v2alpha1.NodeSpec{
			ClusterConfig: v2alpha1.ClusterConfig{ClusterName: tenant, TenantID: fmt.Sprint(tn), TenantName: fmt.Sprint("Tenant ", tn)}, Up: ptr.To(true),
			ExpressVersion: "express-e689.154", DeploymentRevision: "r7", ConfigChangeset: "c12",
			DeploymentDependencies: &v2alpha1.DeploymentDependencies{
				ProvisioningPrerequisites: prerequisites("be", "fe1", "fe2", "fe3", "fe4"),
				UpgradePrerequisites:      prerequisites("fe1", "fe2", "be", "fe3", "fe4"),
			},
		},
		Status: v2alpha1.NodeStatus{Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "PodsReady", Message: "1/1 pods Ready", LastTransitionTime: metav1.Date(2026, 12, 2, 10, 0, 3, 0, time.UTC), ObservedGeneration: 7},
			{Type: v2alpha1.ConditionPrerequisitesReady, Status: metav1.ConditionTrue, Reason: v2alpha1.ReasonRolloutComplete,
				Message:            "Ready on express-e689.154 (target " + hash(node)[:12] + "), released after " + strings.Join(rendered[:5], ", "),
				LastTransitionTime: metav1.Date(2026, 12, 2, 10, 0, 3, 0, time.UTC), ObservedGeneration: 7},
		}},
	}
	out, err := json.Marshal(n)
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

var tenantKeys = []string{"be", "fe1", "fe2", "fe3", "fe4", "fe5", "fe6", "fe7"}

// uid is a UID of its own for each of tenant tn's objects.
func uid(tn int, of string) string {
	h := sha256.Sum256(fmt.Append(nil, tn, of))
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

// BenchmarkTheCacheKeepsANode reports the heap a cached node holds
// (B/node), as decoded and as StripNode keeps it, and StripNode's time
// (strip-ns/node), over the nodes of 500 tenants of 8: nodes never rolled
// out again (no rollout-history), rolled out once (the benchmark's
// upgrade: one record in each) and five times or more (the history's full
// length).
func BenchmarkTheCacheKeepsANode(b *testing.B) {
	const tenants = 500
	nodes := tenants * len(tenantKeys)
	for _, records := range []int{0, 1, v2alpha1.RolloutHistoryLength} {
		var raws [][]byte
		for tn := range tenants {
			for _, k := range tenantKeys {
				raws = append(raws, storedNode(b, tn, k, records))
			}
		}
		for _, strip := range []bool{false, true} {
			b.Run(fmt.Sprintf("records=%d/strip=%t", records, strip), func(b *testing.B) {
				var perNode float64
				var stripping time.Duration
				for range b.N {
					perNode = heap.PerObject(nodes, func(i int) any {
						n := &v2alpha1.Frontend{}
						if err := json.Unmarshal(raws[i], n); err != nil {
							b.Fatal(err)
						}
						if strip {
							started := time.Now()
							if _, err := StripNode(n); err != nil {
								b.Fatal(err)
							}
							stripping += time.Since(started)
						}
						return n
					})
				}
				if strip {
					b.ReportMetric(float64(stripping.Nanoseconds())/float64(b.N*nodes), "strip-ns/node")
				}
				b.ReportMetric(perNode, "B/node")
				b.ReportMetric(float64(len(raws[len(raws)/2])), "stored-B")
			})
		}
	}
}

// BenchmarkTheCacheKeepsAPod reports the heap a cached Express pod holds
// (B/pod), as decoded (keep=whole) and as stripPod keeps it (keep=kept),
// over the pods of 500 tenants of 8, one a node.
func BenchmarkTheCacheKeepsAPod(b *testing.B) {
	const pods = 500 * 8
	raws := make([][]byte, pods)
	for i := range raws {
		p := expressPod()
		p.Name, p.Namespace, p.UID = fmt.Sprintf("tenant-%04d-fe1-0", i), fmt.Sprintf("tenant-%04d", i/8), types.UID(uid(i, "pod"))
		raw, err := json.Marshal(p)
		if err != nil {
			b.Fatal(err)
		}
		raws[i] = raw
	}
	for _, kept := range []bool{false, true} {
		b.Run(fmt.Sprintf("keep=%s", map[bool]string{false: "whole", true: "kept"}[kept]), func(b *testing.B) {
			var perPod float64
			for range b.N {
				perPod = heap.PerObject(pods, func(i int) any {
					p := &corev1.Pod{}
					if err := json.Unmarshal(raws[i], p); err != nil {
						b.Fatal(err)
					}
					if !kept {
						return p
					}
					held, err := stripPod(p)
					if err != nil {
						b.Fatal(err)
					}
					return held
				})
			}
			b.ReportMetric(perPod, "B/pod")
		})
	}
}
