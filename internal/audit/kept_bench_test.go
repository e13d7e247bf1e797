package audit

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/heap"
)

// storedObjects are node key of tenant tn as the API server serves it —
// the Frontend, its StatefulSet and its pod, each as its watch decodes it —
// with what the webhook, the sequencer, the Express operator, the
// StatefulSet controller and a kubelet write on them.
func storedObjects(tb testing.TB, tn int, key string) (node []byte, set, pod any) {
	tb.Helper()
	tenant := fmt.Sprintf("tenant-%04d", tn)
	name := tenant + "-" + key
	hash := fmt.Sprintf("%064x", tn*8+len(key))
	at := metav1.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	labels := map[string]string{v2alpha1.LabelNode: name, v2alpha1.LabelTargetHash: hash[:63], v2alpha1.LabelExpressVersion: "express-e689.154",
		v2alpha1.LabelDeploymentRevision: "r7", "app.kubernetes.io/name": "express", "app.kubernetes.io/instance": tenant}
	n := &v2alpha1.Frontend{
		TypeMeta: metav1.TypeMeta{APIVersion: v2alpha1.GroupVersion.String(), Kind: v2alpha1.KindFrontend},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant, UID: types.UID(fmt.Sprintf("%036d", tn)), ResourceVersion: fmt.Sprint(1234567 + tn),
			Generation: 7, CreationTimestamp: at, Annotations: map[string]string{
				v2alpha1.AnnotationTargetHash: hash, v2alpha1.AnnotationReleasedTarget: hash, v2alpha1.AnnotationReleasedAt: at.Format(time.RFC3339),
				v2alpha1.AnnotationRolloutHistory:         `[{"target":"` + hash + `","released":"2026-12-02T10:00:00Z","converged":true}]`,
				v2alpha1.AnnotationDefaultedPrerequisites: "true", v2alpha1.AnnotationRenderedNodes: tenant + "-be," + tenant + "-fe1"}},
		Spec: v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: tenant}, Up: ptr.To(true), ExpressVersion: "express-e689.154", DeploymentRevision: "r7",
			DeploymentDependencies: &v2alpha1.DeploymentDependencies{UpgradePrerequisites: []v2alpha1.Prerequisite{{ExpressNode: tenant + "-be", Kind: v2alpha1.KindBackend}}}},
		Status: v2alpha1.NodeStatus{Conditions: []metav1.Condition{
			{Type: "Ready", Status: metav1.ConditionTrue, Reason: "PodsReady", Message: "1/1 pods Ready", LastTransitionTime: at},
			{Type: v2alpha1.ConditionPrerequisitesReady, Status: metav1.ConditionTrue, Reason: v2alpha1.ReasonRolloutComplete, Message: "Ready on express-e689.154", LastTransitionTime: at},
		}},
	}
	node, err := json.Marshal(n)
	if err != nil {
		tb.Fatal(err)
	}
	container := corev1.Container{Name: "express", Image: "registry.example/express:e689.154", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
		Env:            []corev1.EnvVar{{Name: "TENANT", Value: tenant}, {Name: "NODE", Value: key}},
		Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/ready", Port: intstr.FromString("http")}}}}
	yes := true
	owner := []metav1.OwnerReference{{APIVersion: v2alpha1.GroupVersion.String(), Kind: v2alpha1.KindFrontend, Name: name, UID: n.UID, Controller: &yes}}
	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant, UID: types.UID(fmt.Sprintf("s%035d", tn)), ResourceVersion: "7",
		Generation: 3, OwnerReferences: owner, CreationTimestamp: at},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), ServiceName: name, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{v2alpha1.LabelNode: name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{container}}}},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 3, Replicas: 1, ReadyReplicas: 1, CurrentReplicas: 1, UpdatedReplicas: 1,
			CurrentRevision: name + "-6d9f8c7b5", UpdateRevision: name + "-6d9f8c7b5"}}
	podLabels := map[string]string{appsv1.ControllerRevisionHashLabelKey: name + "-6d9f8c7b5", appsv1.StatefulSetPodNameLabel: name + "-0"}
	for k, v := range labels {
		podLabels[k] = v
	}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name + "-0", Namespace: tenant, UID: types.UID(fmt.Sprintf("p%035d", tn)), ResourceVersion: "9",
		Labels: podLabels, CreationTimestamp: at,
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name, UID: s.UID, Controller: &yes}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{container}, NodeName: "machine-1", Hostname: name + "-0"},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &at, PodIP: "10.0.0.1", HostIP: "192.168.0.1",
			ContainerStatuses: []corev1.ContainerStatus{{Name: "express", Ready: true, Image: container.Image, ImageID: "sha256:" + hash, ContainerID: "containerd://" + hash,
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}}}}}
	for _, c := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.PodReady, corev1.ContainersReady, corev1.PodScheduled} {
		p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: c, Status: corev1.ConditionTrue, LastTransitionTime: at})
	}
	return node, roundTrip(tb, s, &appsv1.StatefulSet{}), roundTrip(tb, p, &corev1.Pod{})
}

// roundTrip is in as JSON decodes it into out: every string its own copy,
// as a watch gives it.
func roundTrip[T any](tb testing.TB, in any, out T) T {
	data, err := json.Marshal(in)
	if err != nil {
		tb.Fatal(err)
	}
	if err := json.Unmarshal(data, out); err != nil {
		tb.Fatal(err)
	}
	return out
}

// BenchmarkTheAuditorKeepsANode reports the heap the auditor's watches
// hold of an Express node — its Frontend, its StatefulSet and its pod —
// as decoded (keep=whole) and as their transforms keep them (keep=kept),
// B/node over the nodes of 500 tenants of 8, each object kind apart and
// together.
func BenchmarkTheAuditorKeepsANode(b *testing.B) {
	const tenants = 500
	type stored struct {
		node     []byte
		set, pod any
	}
	var objects []stored
	for tn := range tenants {
		for _, k := range []string{"be", "fe1", "fe2", "fe3", "fe4", "fe5", "fe6", "fe7"} {
			node, set, pod := storedObjects(b, tn, k)
			objects = append(objects, stored{node, set, pod})
		}
	}
	transforms := map[string]func(any) (any, error){"node": stripNode(v2alpha1.KindFrontend), "set": stripSet, "pod": stripPod}
	for _, kept := range []bool{false, true} {
		for _, kind := range []string{"node", "set", "pod"} {
			b.Run(fmt.Sprintf("keep=%s/%s", map[bool]string{false: "whole", true: "kept"}[kept], kind), func(b *testing.B) {
				var perNode float64
				for range b.N {
					perNode = heap.PerObject(len(objects), func(i int) any {
						o := objects[i]
						var obj any
						switch kind {
						case "node":
							u := &unstructured.Unstructured{}
							if err := u.UnmarshalJSON(o.node); err != nil {
								b.Fatal(err)
							}
							obj = u
						case "set":
							obj = roundTrip(b, o.set, &appsv1.StatefulSet{})
						case "pod":
							obj = roundTrip(b, o.pod, &corev1.Pod{})
						}
						if kept {
							var err error
							if obj, err = transforms[kind](obj); err != nil {
								b.Fatal(err)
							}
						}
						return obj
					})
				}
				b.ReportMetric(perNode, "B/node")
			})
		}
	}
}
