package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/test/framework/tenant"
)

// fe1 is released in a change to all and converges while no sequencer
// runs, so no RolloutComplete record of the sequencer's says so; then be's
// pod fails, fe1's is lost, and be's failed pod is replaced. Only fe1's
// StatefulSet remembers that its rollout converged (currentRevision =
// updateRevision after a template change): fe1 is recovering, not rolling,
// and its new pod waits for be's, which is held by no one. Taken as still
// rolling, fe1 came back alongside be instead of after it. be fails before
// fe1's pod is lost, so that fe1's new pod is always created while be is
// not Ready.
func TestARolloutThatConvergedUnseenRecoversAfterItsPredecessorsByItsStatefulSetsRecord(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	replicas.set(ns, 1)
	grace.set(ns, 2*time.Second) // time enough to stop the sequencer before fe1's new pod starts
	createNodes(t, ns, 3)
	waitSettled(t, ns)

	setVersion(t, ns, v2, keys(3)...)
	fe1 := waitReleased(t, ns, "fe1")
	stopSequencer()
	t.Cleanup(func() { stopSequencer(); require.NoError(t, startSequencer()) })

	set := &appsv1.StatefulSet{}
	require.True(t, waitFor(time.Minute, func() bool {
		return harness.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-fe1"}, set) == nil &&
			set.Spec.Template.Labels[v2alpha1.LabelTargetHash] == fe1.GetAnnotations()[v2alpha1.AnnotationTargetHash] &&
			set.Status.ObservedGeneration == set.Generation && set.Status.ReadyReplicas == 1 &&
			set.Status.CurrentRevision == set.Status.UpdateRevision
	}), "fe1's StatefulSet converged on its new target")
	require.NoError(t, harness.Client.Get(ctx, client.ObjectKeyFromObject(fe1), fe1))
	if c := condition(fe1); c != nil {
		require.NotEqual(t, v2alpha1.ReasonRolloutComplete, c.Reason, "no sequencer saw fe1 converge")
	}

	mark := time.Now()
	require.NoError(t, cluster.Crash(ctx, ns, "acme-be"))
	require.NoError(t, harness.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels{v2alpha1.LabelNode: "acme-fe1"}))
	// The pod webhook decides while no sequencer runs, be not Ready: fe1's
	// new pod is created scheduling-gated.
	fe1Pod := recreatedPod(t, ns, "acme-fe1")
	require.Equal(t, []corev1.PodSchedulingGate{{Name: v2alpha1.GateSequencer}}, fe1Pod.Spec.SchedulingGates,
		"fe1's recreated pod waits, scheduling-gated, for be")
	require.NoError(t, cluster.Mend(ctx, ns))
	bePod := recreatedPod(t, ns, "acme-be")
	assert.Empty(t, bePod.Spec.SchedulingGates, "be's replacement waits for no one")
	require.NoError(t, startSequencer())
	waitSettled(t, ns)
	assert.Equal(t, "be fe1 fe2 be", starts(ns, mark), "be recovers, then fe1, then the change goes on: fe2, be")
	var beReady, fe1Started time.Time
	for _, e := range pods.Since(ns, mark) {
		switch {
		case e.Node == "acme-be" && e.Ready && beReady.IsZero():
			beReady = e.At
		case e.Node == "acme-fe1" && !e.Ready && !e.Terminating && fe1Started.IsZero():
			fe1Started = e.At
		}
	}
	require.False(t, beReady.IsZero(), "be's recreated pod became Ready")
	assert.True(t, fe1Started.After(beReady), "fe1's recreated pod started (%s) after be's was Ready (%s)",
		fe1Started.Format(time.StampMilli), beReady.Format(time.StampMilli))
}

// recreatedPod waits for the one pod of node that is not being deleted
// and was created after the test deleted or failed the node's pods, and
// returns it.
func recreatedPod(t *testing.T, ns, node string) corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	require.True(t, waitFor(time.Minute, func() bool {
		var list corev1.PodList
		if harness.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v2alpha1.LabelNode: node}) != nil ||
			len(list.Items) != 1 || list.Items[0].DeletionTimestamp != nil || list.Items[0].Annotations[controlplane.CrashAnnotation] == "true" {
			return false
		}
		pod = list.Items[0]
		return true
	}), "%s's pod is recreated", node)
	return pod
}

func condition(n v2alpha1.Node) *metav1.Condition { return tenant.Condition(n) }

// The same, with be crashed instead of merely restarting: be needs its
// release to be Ready again, and its release waits, in the upgrade order,
// for fe1 and fe2. Only the StatefulSet's record tells fe1's recreated pod
// from a rollout still under way (which would start at once, being what be
// waits for): fe1 is recovering, its pod waits for be, and the crashed be
// goes first, as it does when a change to all finds it crashed.
func TestACrashedBackendGoesBeforeARolloutThatConvergedUnseen(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	replicas.set(ns, 1)
	grace.set(ns, 2*time.Second)
	createNodes(t, ns, 3)
	waitSettled(t, ns)

	setVersion(t, ns, v2, keys(3)...)
	fe1 := waitReleased(t, ns, "fe1")
	stopSequencer()
	t.Cleanup(func() { stopSequencer(); require.NoError(t, startSequencer()) })
	set := &appsv1.StatefulSet{}
	require.True(t, waitFor(time.Minute, func() bool {
		return harness.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-fe1"}, set) == nil &&
			set.Spec.Template.Labels[v2alpha1.LabelTargetHash] == fe1.GetAnnotations()[v2alpha1.AnnotationTargetHash] &&
			set.Status.ObservedGeneration == set.Generation && set.Status.ReadyReplicas == 1 &&
			set.Status.CurrentRevision == set.Status.UpdateRevision
	}), "fe1's StatefulSet converged on its new target")

	mark := time.Now()
	require.NoError(t, cluster.Crash(ctx, ns, "acme-be"))
	require.NoError(t, harness.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabels{v2alpha1.LabelNode: "acme-fe1"}))
	require.NoError(t, startSequencer())
	waitSettled(t, ns)
	assert.Equal(t, "be fe1 fe2", starts(ns, mark), "be crashed in place, rolled out first, then fe1 recovers and the change goes on")
	var beReady, fe1Started time.Time
	for _, e := range pods.Since(ns, mark) {
		switch {
		case e.Node == "acme-be" && e.Ready && beReady.IsZero():
			beReady = e.At
		case e.Node == "acme-fe1" && !e.Ready && !e.Terminating && fe1Started.IsZero():
			fe1Started = e.At
		}
	}
	require.False(t, beReady.IsZero(), "be's new pod became Ready")
	assert.True(t, fe1Started.After(beReady), "fe1's recreated pod started (%s) after be was Ready (%s)",
		fe1Started.Format(time.StampMilli), beReady.Format(time.StampMilli))
}

// A rollout reverted before it converged: fe2 rolled to a broken build
// (its pod crash-loops) and back. The StatefulSet controller reuses the old
// revision, so currentRevision equals updateRevision the moment the revert
// is out, while fe2's broken pod is still there (Terminating). That is no
// record of convergence — the release recorded that very revision — so fe2
// is still rolling, and a backend change that waits for fe2 on its target,
// the backend crashing meanwhile, still waits for fe2 Ready on it.
func TestARevertedRolloutIsNotTakenAsConvergedByItsStatefulSet(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	grace.set(ns, 3*time.Second) // fe2's broken pod stays Terminating a while after the revert
	createNodes(t, ns, 3)
	waitSettled(t, ns)
	fe2 := node(ns, "fe2")
	setVersion(t, ns, "broken", "fe2")
	require.True(t, waitFor(time.Minute, func() bool {
		var list corev1.PodList
		return harness.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabels{v2alpha1.LabelNode: "acme-fe2", v2alpha1.LabelExpressVersion: "broken"}) == nil &&
			len(list.Items) == 1 && slices.ContainsFunc(list.Items[0].Status.ContainerStatuses, func(s corev1.ContainerStatus) bool {
			return s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff"
		})
	}), "fe2's broken build crash-loops")

	mark := time.Now()
	setVersion(t, ns, v1, "fe2") // the revert
	require.True(t, waitFor(time.Minute, func() bool {
		return harness.Client.Get(ctx, client.ObjectKeyFromObject(fe2), fe2) == nil && !v2alpha1.IsGated(fe2) &&
			fe2.GetAnnotations()[v2alpha1.AnnotationReleasedTarget] == fe2.GetAnnotations()[v2alpha1.AnnotationTargetHash]
	}), "the revert is released")
	setVersion(t, ns, v2, "be")
	require.NoError(t, cluster.Crash(ctx, ns, "acme-be"))
	set := &appsv1.StatefulSet{}
	require.NoError(t, harness.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-fe2"}, set))
	waitSettled(t, ns)
	var fe2Ready, beStarted time.Time
	for _, e := range pods.Since(ns, mark) {
		switch {
		case e.Node == "acme-fe2" && e.Ready && fe2Ready.IsZero():
			fe2Ready = e.At
		case e.Node == "acme-be" && !e.Ready && !e.Terminating && beStarted.IsZero():
			beStarted = e.At
		}
	}
	require.False(t, fe2Ready.IsZero(), "fe2 became Ready on the reverted target")
	assert.True(t, beStarted.After(fe2Ready), "be's new pod started (%s) after fe2 was Ready on its target (%s)",
		beStarted.Format(time.StampMilli), fe2Ready.Format(time.StampMilli))
}
