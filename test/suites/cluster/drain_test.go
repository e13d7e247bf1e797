package cluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// readyPodsAt returns the pods of node (its name) Ready and not
// Terminating at instant at, by the pod log: each pod's version by its UID.
func readyPodsAt(events []controlplane.PodEvent, node string, at time.Time) map[string]string {
	ready := map[string]string{}
	for _, e := range events {
		if e.At.After(at) {
			break
		}
		if e.Node != node {
			continue
		}
		switch {
		case e.Terminating:
			delete(ready, string(e.UID))
		case e.Ready:
			ready[string(e.UID)] = e.Version
		}
	}
	return ready
}

// readyAt reports whether node had, at instant at, a pod Ready and not
// Terminating.
func readyAt(events []controlplane.PodEvent, node string, at time.Time) bool {
	return len(readyPodsAt(events, node, at)) > 0
}

// readyDuring reports whether node had a Ready pod at some instant from
// from to to.
func readyDuring(events []controlplane.PodEvent, node string, from, to time.Time) bool {
	if readyAt(events, node, from) {
		return true
	}
	return slices.ContainsFunc(events, func(e controlplane.PodEvent) bool {
		return e.Node == node && e.Ready && e.At.After(from) && !e.At.After(to)
	})
}

// A Node drained with kubectl, through the Eviction API, while a
// PodDisruptionBudget lets at most one pod of the tenant be unavailable:
// drain evicts the tenant's pods one at a time, each once the one before
// was recreated and Ready on the other Node, and every recreated pod is let
// go (schedulable) only while the nodes it is provisioned after (default
// order: be, then each frontend after every node before it) are Ready.
func TestADrainedNodeWithAPodDisruptionBudgetHandsItsPodsOverInOrder(t *testing.T) {
	ctx := context.Background()
	drained, other := cluster.Nodes[0], cluster.Nodes[len(cluster.Nodes)-1]
	require.NoError(t, cluster.Cordon(ctx, other, true))
	ns := settledTenant(t, 4, 1)
	require.NoError(t, cluster.Cordon(ctx, other, false))
	var list corev1.PodList
	require.NoError(t, harness.Client.List(ctx, &list, client.InNamespace(ns)))
	for _, p := range list.Items {
		require.Equal(t, drained, p.Spec.NodeName, "every pod of the tenant runs on %s", drained)
	}
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "acme", Namespace: ns},
		Spec: policyv1.PodDisruptionBudgetSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			Selector:       &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: v2alpha1.LabelNode, Operator: metav1.LabelSelectorOpExists}}},
		},
	}
	require.NoError(t, harness.Client.Create(ctx, pdb))
	require.True(t, waitFor(time.Minute, func() bool {
		return harness.Client.Get(ctx, client.ObjectKeyFromObject(pdb), pdb) == nil && pdb.Status.ObservedGeneration == pdb.Generation && pdb.Status.DisruptionsAllowed == 1
	}), "the disruption controller allows one disruption")

	kubeconfig, err := harness.KubeconfigFile(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, cluster.Cordon(ctx, drained, false)) })
	mark := time.Now()
	drain := exec.CommandContext(ctx, filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), "--kubeconfig", kubeconfig,
		"drain", drained, "--ignore-daemonsets", "--delete-emptydir-data", "--pod-selector", v2alpha1.LabelNode, "--timeout", "3m")
	out, err := drain.CombinedOutput()
	require.NoError(t, err, "kubectl drain: %s", out)
	assert.Contains(t, string(out), "evicted")
	require.True(t, waitFor(time.Minute, func() bool {
		if harness.Client.List(ctx, &list, client.InNamespace(ns)) != nil || len(list.Items) != 4 {
			return false
		}
		for _, p := range list.Items {
			if p.Spec.NodeName != other || p.DeletionTimestamp != nil || !slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
				return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
			}) {
				return false
			}
		}
		return true
	}), "every node is back, Ready on %s", other)
	events := pods.Since(ns, time.Time{})
	order := []string{"acme-be", "acme-fe1", "acme-fe2", "acme-fe3"}
	started := 0
	for _, e := range events {
		if e.At.Before(mark) || e.Ready || e.Terminating {
			continue
		}
		started++
		// The order lets a pod go when it makes it schedulable (admitted
		// without the gate, or the gate removed); the scheduler binds it
		// a moment later, whatever its predecessors do meanwhile. A pod
		// admitted without the gate was decided on the pod webhook's read,
		// made during its admission, which ends when the pod is created and
		// began at most the webhook's timeoutSeconds (5) before: drain
		// evicts concurrently, and a predecessor evicted while a successor's
		// pod is admitted is the race docs/sequencer.md accepts. A gate
		// removed is judged again in its own admission (the release
		// guard): its predecessors were Ready when it went.
		for _, prev := range order[:slices.Index(order, e.Node)] {
			from := e.Schedulable
			if !e.Gated {
				from = from.Add(-5 * time.Second)
			}
			assert.True(t, readyDuring(events, prev, from, e.Schedulable), "%s's pod %s was let go (%s, created gated: %v) while %s was not Ready", e.Node, e.Pod,
				e.Schedulable.Format(time.StampMilli), e.Gated, prev)
		}
	}
	assert.Equal(t, 4, started, "each node's pod was evicted and recreated once")
	if t.Failed() {
		dump(t, ns)
	}
}
