package controlplane

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// StatefulSetsReady reports whether every StatefulSet of ns has as many
// pods Ready as it wants.
func StatefulSetsReady(ctx context.Context, c client.Reader, ns string) bool {
	var sets appsv1.StatefulSetList
	if err := c.List(ctx, &sets, client.InNamespace(ns)); err != nil {
		return false
	}
	for _, s := range sets.Items {
		if s.Status.ReadyReplicas != ptr.Deref(s.Spec.Replicas, 1) {
			return false
		}
	}
	return true
}

// Describe says, a line each, what the nodes, StatefulSets and pods of ns
// say and what log recorded of its pods: for a test whose tenant did not
// settle.
func Describe(ctx context.Context, c client.Reader, log *PodLog, ns string) []string {
	var out []string
	nodes, _ := Nodes(ctx, c, ns)
	for _, n := range nodes {
		out = append(out, fmt.Sprintf("node %s gated=%v target=%s released=%s conditions=%+v", n.GetName(), v2alpha1.IsGated(n),
			n.GetAnnotations()[v2alpha1.AnnotationTargetHash], n.GetAnnotations()[v2alpha1.AnnotationReleasedTarget], n.NodeStatus().Conditions))
	}
	var sets appsv1.StatefulSetList
	_ = c.List(ctx, &sets, client.InNamespace(ns))
	for _, s := range sets.Items {
		out = append(out, fmt.Sprintf("statefulset %s replicas=%d status=%+v", s.Name, ptr.Deref(s.Spec.Replicas, 1), s.Status))
	}
	var pods corev1.PodList
	_ = c.List(ctx, &pods, client.InNamespace(ns))
	for _, p := range pods.Items {
		out = append(out, fmt.Sprintf("pod %s machine=%q labels=%v gates=%v deleting=%v conditions=%v", p.Name, p.Spec.NodeName, p.Labels,
			p.Spec.SchedulingGates, p.DeletionTimestamp != nil, p.Status.Conditions))
	}
	if log != nil {
		for _, e := range log.Since(ns, time.Time{}) {
			out = append(out, fmt.Sprintf("event %s %s ready=%v terminating=%v gated=%v schedulable=%s version=%s uid=%s", e.At.Format(time.StampMilli), e.Pod,
				e.Ready, e.Terminating, e.Gated, e.Schedulable.Format(time.StampMilli), e.Version, e.UID))
		}
	}
	return out
}
