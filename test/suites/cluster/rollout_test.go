package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// eachAfterTheLast asserts that, since mark, every node of order started
// its first pod only after the node before it had its last pod Ready: each
// step of the order starts only once the previous one is Ready, all of its
// pods.
func eachAfterTheLast(t *testing.T, ns string, mark time.Time, order ...string) {
	t.Helper()
	firstBound, lastReady := map[string]time.Time{}, map[string]time.Time{}
	for _, e := range pods.Since(ns, mark) {
		switch {
		case e.Terminating:
		case e.Ready:
			lastReady[e.Node] = e.At
		case firstBound[e.Node].IsZero():
			firstBound[e.Node] = e.At
		}
	}
	for i := 1; i < len(order); i++ {
		prev, cur := "acme-"+order[i-1], "acme-"+order[i]
		require.False(t, lastReady[prev].IsZero(), "%s became Ready", prev)
		assert.True(t, firstBound[cur].After(lastReady[prev]), "%s's first pod started (%s) after %s's last became Ready (%s)",
			cur, firstBound[cur].Format(time.StampMilli), prev, lastReady[prev].Format(time.StampMilli))
	}
}

func TestANewTenantIsProvisionedBackendFirstByItsStatefulSets(t *testing.T) {
	mark := time.Now()
	ns := settledTenant(t, 4, 1)
	assert.Equal(t, "be fe1 fe2 fe3", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "be", "fe1", "fe2", "fe3")
}

func TestAChangeToAllNodesRollsFe1Fe2ThenTheBackendOnRealStatefulSets(t *testing.T) {
	ns := settledTenant(t, 4, 1)
	mark := time.Now()
	setVersion(t, ns, v2, keys(4)...)
	waitSettled(t, ns)
	assert.Equal(t, "fe1 fe2 be fe3", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "fe1", "fe2", "be", "fe3")
}

// Three pods per node, rolled by the StatefulSet's own rolling update (one
// pod at a time, in reverse ordinal order): fe1's three pods are all Ready
// on the new target before fe2's first starts.
func TestThreeReplicasPerNodeAreRolledByTheStatefulSetBeforeTheNextNodeStarts(t *testing.T) {
	ns := settledTenant(t, 3, 3)
	mark := time.Now()
	setVersion(t, ns, v2, keys(3)...)
	waitSettled(t, ns)
	assert.Equal(t, "fe1 fe2 be", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "fe1", "fe2", "be")
	readyOnTarget := 0
	for _, e := range pods.Since(ns, mark) {
		if e.Ready && e.Node == "acme-fe1" {
			readyOnTarget++
		}
	}
	assert.Equal(t, 3, readyOnTarget, "fe1 rolled three pods")
}

// Every pod of a tenant deleted in one call: the StatefulSets recreate them
// under the same names at once, and they start backend first, each after
// the one before it is Ready (the later ones wait SchedulingGated).
func TestEveryPodOfATenantDeletedAtOnceComesBackBackendFirst(t *testing.T) {
	ns := settledTenant(t, 4, 1)
	mark := time.Now()
	require.NoError(t, harness.Client.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns), client.HasLabels{v2alpha1.LabelNode}))
	require.True(t, waitFor(time.Minute, func() bool { return starts(ns, mark) == "be fe1 fe2 fe3" && allPods(ns) }),
		"recovery order %q", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "be", "fe1", "fe2", "fe3")
	var list corev1.PodList
	require.NoError(t, harness.Client.List(context.Background(), &list, client.InNamespace(ns)))
	for _, p := range list.Items {
		assert.Regexp(t, `^acme-(be|fe[123])-0$`, p.Name, "recreated under the StatefulSet's own name")
	}
}

// A node deleted in the middle of a change to all: the garbage collector
// takes its StatefulSet and pods with it, and the rest of the tenant
// proceeds without it.
func TestANodeDeletedMidRolloutLeavesTheOrderAndItsPodsGoWithIt(t *testing.T) {
	ns := settledTenant(t, 4, 1)
	update(t, ns, func(n v2alpha1.Node) {
		ann := n.GetAnnotations()
		ann[v2alpha1.AnnotationPauseRollout] = "true"
		n.SetAnnotations(ann)
	}, "fe2")
	mark := time.Now()
	setVersion(t, ns, v2, keys(4)...)
	require.True(t, waitFor(time.Minute, func() bool { return starts(ns, mark) == "fe1" }), "fe1 started")
	require.NoError(t, harness.Client.Delete(context.Background(), node(ns, "fe2")))
	waitSettled(t, ns)
	assert.Equal(t, "fe1 be fe3", starts(ns, mark))
	require.True(t, waitFor(time.Minute, func() bool {
		var list corev1.PodList
		return harness.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v2alpha1.LabelNode: "acme-fe2"}) == nil && len(list.Items) == 0
	}), "fe2's pods are garbage-collected with it")
}

func TestAChangeToFrontendsOnlyRollsThemInNumberOrder(t *testing.T) {
	ns := settledTenant(t, 4, 1)
	mark := time.Now()
	setVersion(t, ns, v2, "fe1", "fe2", "fe3")
	waitSettled(t, ns)
	assert.Equal(t, "fe1 fe2 fe3", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "fe1", "fe2", "fe3")
}

func TestAChangeToTheBackendOnlyRollsTheBackendAlone(t *testing.T) {
	ns := settledTenant(t, 4, 1)
	mark := time.Now()
	setVersion(t, ns, v2, "be")
	waitSettled(t, ns)
	assert.Equal(t, "be", starts(ns, mark))
}

// fe2 up: false: its StatefulSet is scaled to 0 and the change to all
// closes the gap: fe1, be, fe3.
func TestWithFe2DownAChangeToAllSkipsIt(t *testing.T) {
	ns := settledTenant(t, 4, 1)
	update(t, ns, func(n v2alpha1.Node) { down := false; n.NodeSpec().Up = &down }, "fe2")
	waitSettled(t, ns)
	mark := time.Now()
	setVersion(t, ns, v2, keys(4)...)
	waitSettled(t, ns)
	assert.Equal(t, "fe1 be fe3", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "fe1", "be", "fe3")
}

// Deleted pods stay Terminating for their grace period (KWOK deletes them
// once it is over, and the StatefulSet creates the successor only then):
// a Terminating pod is not Ready, so the next node of a change to all waits
// for the successor, not for the old pod.
func TestATerminatingPodIsNotReadyForTheNextNode(t *testing.T) {
	ns := namespace(t)
	grace.set(ns, 3*time.Second)
	replicas.set(ns, 1)
	createNodes(t, ns, 3)
	waitSettled(t, ns)
	mark := time.Now()
	setVersion(t, ns, v2, keys(3)...)
	waitSettled(t, ns)
	assert.Equal(t, "fe1 fe2 be", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "fe1", "fe2", "be")
	// fe1's old pod was Terminating (and so not Ready) for a while: fe2
	// started only after the successor that replaced it was Ready.
	var terminating, successorReady, fe2Started time.Time
	for _, e := range pods.Since(ns, mark) {
		switch {
		case e.Node == "acme-fe1" && e.Terminating && terminating.IsZero():
			terminating = e.At
		case e.Node == "acme-fe1" && e.Ready && !terminating.IsZero():
			successorReady = e.At
		case e.Node == "acme-fe2" && !e.Ready && !e.Terminating && fe2Started.IsZero():
			fe2Started = e.At
		}
	}
	require.False(t, terminating.IsZero(), "fe1's old pod was seen Terminating")
	require.False(t, successorReady.IsZero(), "fe1's successor became Ready after")
	assert.True(t, fe2Started.After(successorReady), "fe2 started (%s) after fe1's successor was Ready (%s), not while fe1's old pod was Terminating (%s)",
		fe2Started.Format(time.StampMilli), successorReady.Format(time.StampMilli), terminating.Format(time.StampMilli))
}

// A machine lost with every pod of the tenant on it: the Node is deleted,
// the pod garbage collector deletes the pods bound to it, the StatefulSets
// recreate them on the other Node, and they start backend first, each
// after the one before it is Ready — though be's orphaned pod still says
// Ready until it is deleted (a pod on a machine that is gone is not Ready).
func TestANodeLostWithEveryPodOfATenantComesBackBackendFirst(t *testing.T) {
	ctx := context.Background()
	other := cluster.Nodes[len(cluster.Nodes)-1]
	lost := cluster.Nodes[0]
	require.NoError(t, cluster.Cordon(ctx, other, true))
	ns := settledTenant(t, 4, 1)
	require.NoError(t, cluster.Cordon(ctx, other, false))
	var list corev1.PodList
	require.NoError(t, harness.Client.List(ctx, &list, client.InNamespace(ns)))
	for _, p := range list.Items {
		require.Equal(t, lost, p.Spec.NodeName, "every pod of the tenant runs on %s", lost)
	}
	t.Cleanup(func() { require.NoError(t, cluster.AddNode(ctx, lost+"-again")) })
	mark := time.Now()
	require.NoError(t, cluster.DeleteNode(ctx, lost))
	// The later nodes' orphaned pods go first (deleted by hand, as an
	// on-call engineer might), while be's stays, still saying Ready, until
	// the pod garbage collector takes it: no kubelet is left to say it is
	// not. fe1's new pod must not start before be's.
	for _, k := range []string{"fe3", "fe2", "fe1"} {
		require.NoError(t, harness.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels{v2alpha1.LabelNode: "acme-" + k}))
	}
	require.True(t, waitFor(3*time.Minute, func() bool { return starts(ns, mark) == "be fe1 fe2 fe3" && allPods(ns) }),
		"recovery order %q", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "be", "fe1", "fe2", "fe3")
	require.NoError(t, harness.Client.List(ctx, &list, client.InNamespace(ns)))
	for _, p := range list.Items {
		assert.Equal(t, other, p.Spec.NodeName, "%s recreated on the Node left", p.Name)
	}
}
