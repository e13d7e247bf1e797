package controlplane

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// Nodes lists the Backends and Frontends of a namespace.
func Nodes(ctx context.Context, c client.Reader, ns string) ([]v2alpha1.Node, error) {
	return sequencer.NamespaceNodes(ctx, c, ns)
}

// Settled reports whether every node in the namespace is done: an up node
// ungated, RolloutComplete for its current generation, and every one of its
// pods Ready, schedulable and carrying its target hash (a condition alone may
// still be the one written before a crash); a down node without pods. When
// not, it says which node is not and why.
func Settled(ctx context.Context, c client.Reader, ns string) (bool, string, error) {
	nodes, err := Nodes(ctx, c, ns)
	if err != nil {
		return false, "", err
	}
	for _, n := range nodes {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{v2alpha1.LabelNode: n.GetName()}); err != nil {
			return false, "", err
		}
		if !n.NodeSpec().IsUp() {
			if len(pods.Items) > 0 {
				return false, n.GetName() + " is down but still has pods", nil
			}
			continue
		}
		cond := meta.FindStatusCondition(n.NodeStatus().Conditions, v2alpha1.ConditionPrerequisitesReady)
		if v2alpha1.IsGated(n) || cond == nil || cond.Reason != v2alpha1.ReasonRolloutComplete || cond.ObservedGeneration != n.GetGeneration() {
			return false, fmt.Sprintf("%s gated=%v condition=%v", n.GetName(), v2alpha1.IsGated(n), cond), nil
		}
		if len(pods.Items) == 0 {
			return false, n.GetName() + " has no pods", nil
		}
		for _, p := range pods.Items {
			pod := rollout.PodOf(&p)
			if pod.Conditions[string(corev1.PodReady)] != string(corev1.ConditionTrue) || len(pod.Gates) > 0 ||
				pod.Hash != n.GetAnnotations()[v2alpha1.AnnotationTargetHash] {
				return false, fmt.Sprintf("%s: pod %s Ready=%s scheduling gates=%v target-hash=%s", n.GetName(), p.Name,
					pod.Conditions[string(corev1.PodReady)], pod.Gates, pod.Hash), nil
			}
		}
	}
	return len(nodes) > 0, "no nodes", nil
}
