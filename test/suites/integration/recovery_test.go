package integration

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"

	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// Recovery is ordered at the pods (DESIGN v2 §4b): pods recreated with no
// delay anywhere — a StatefulSet after a node failure — are held
// scheduling-gated until their node's provisioning-predecessors are Ready.

// startsSince returns the pod starts in ns after the first mark.
func startsSince(ns string, mark int) []controlplane.PodEvent {
	return started(ns)[mark:]
}

func TestAllPodsRecreatedAtOnceRecoverBackendFirst(t *testing.T) {
	startSequencer(t)
	ns, mark := settledTenant(t, 5)
	evict(t, ns, "fe4", "fe3", "fe2", "fe1", "be") // the worst order: frontends first
	waitSettled(t, ns, 5)
	if startedSince(ns, mark) != "be fe1 fe2 fe3 fe4" {
		for _, s := range startsSince(ns, 0) {
			t.Logf("start: %+v", s)
		}
		dump(t, ns)
	}
	assert.Equal(t, "be fe1 fe2 fe3 fe4", startedSince(ns, mark))
	for _, s := range startsSince(ns, mark) {
		assert.Equal(t, s.Node != "acme-be", s.Gated, "%s: the frontends' pods are created SchedulingGated, the backend's is not", s.Node)
	}
	assertEachStartedAfterThePreviousWasReady(t, ns, mark)
}

func TestRecoveryWithTheSequencerDownWaitsAndThenRecoversInOrder(t *testing.T) {
	stop := startSequencer(t)
	ns, mark := settledTenant(t, 5)
	stop()
	evict(t, ns, keys(5)...)
	time.Sleep(30 * time.Second)
	assert.Equal(t, "be", startedSince(ns, mark), "nothing but the backend schedules while no sequencer runs")
	startSequencer(t)
	waitSettled(t, ns, 5)
	assert.Equal(t, "be fe1 fe2 fe3 fe4", startedSince(ns, mark))
	assertEachStartedAfterThePreviousWasReady(t, ns, mark)
}

func TestRecoveryDuringALeaderFailoverStaysInOrder(t *testing.T) {
	elect := func(o *app.Options) {
		o.LeaderElect = true
		o.LeaderElectionID = "rollout-recovery-failover"
		o.LeaderElectionNS = "default"
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 2*time.Second, 1500*time.Millisecond, 200*time.Millisecond
	}
	stopFirst := startSequencer(t, elect)
	ns, mark := settledTenant(t, 5)
	startSequencer(t, elect)
	evict(t, ns, keys(5)...)
	stopFirst() // the leader goes away as the pods come back
	waitSettled(t, ns, 5)
	assert.Equal(t, "be fe1 fe2 fe3 fe4", startedSince(ns, mark))
	assertEachStartedAfterThePreviousWasReady(t, ns, mark)
}

func TestPodsOfFe2AndFe4RecreatedAtOnceRecoverFe2First(t *testing.T) {
	startSequencer(t)
	ns, mark := settledTenant(t, 5)
	evict(t, ns, "fe4", "fe2")
	waitSettled(t, ns, 5)
	assert.Equal(t, "fe2 fe4", startedSince(ns, mark))
}

func TestNoFrontendPodSchedulesWhileTheBackendRecovers(t *testing.T) {
	startSequencer(t)
	ns, mark := settledTenant(t, 5)
	crash(t, ns, "be")  // the backend's pod keeps failing…
	evict(t, ns, "fe3") // …so a frontend pod recreated meanwhile must wait
	require.True(t, waitFor(10*time.Second, func() bool { return heldPod(t, ns, "fe3") != "" }), "fe3's recreated pod is held")
	time.Sleep(2 * time.Second)
	assert.Empty(t, startsSince(ns, mark), "nothing started while the backend is crashed")
	assert.NotEmpty(t, heldPod(t, ns, "fe3"), "fe3's pod still waits")
	mend(t, ns)
	waitSettled(t, ns, 5)
	assert.Equal(t, "be fe3", startedSince(ns, mark))
	if starts := startsSince(ns, mark); assert.Len(t, starts, 2) {
		assert.False(t, starts[0].Gated, "the backend's new pod is not held")
		assert.True(t, starts[1].Gated, "fe3's pod was created SchedulingGated")
	}
	assertEachStartedAfterThePreviousWasReady(t, ns, mark)
}

// heldPod names a pod of node k in ns that waits scheduling-gated, if any.
func heldPod(t *testing.T, ns, k string) string {
	t.Helper()
	var list corev1.PodList
	require.NoError(t, harness.Client.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v2alpha1.LabelNode: "acme-" + k}))
	for _, p := range list.Items {
		if len(p.Spec.SchedulingGates) > 0 && p.DeletionTimestamp == nil {
			return p.Name
		}
	}
	return ""
}

func TestAPodRecreatedInAReleasedRolloutIsNotGated(t *testing.T) {
	startSequencer(t)
	ns, mark := settledTenant(t, 5)
	stick(ns, "fe1")
	setVersion(t, ns, v2, keys(5)...)
	require.True(t, waitFor(20*time.Second, func() bool { return startedSince(ns, mark) == "fe1" }))
	evict(t, ns, "fe1") // fe1 is released, rolling, not converged
	require.True(t, waitFor(20*time.Second, func() bool { return startedSince(ns, mark) == "fe1 fe1" }),
		"fe1's recreated pod starts: %s", startedSince(ns, mark))
	assert.False(t, startsSince(ns, mark)[1].Gated, "a half-done rollout is never frozen")
	unstick(t, ns, "fe1")
	waitSettled(t, ns, 5)
	assert.Equal(t, "fe1 fe1 fe2 be fe3 fe4", startedSince(ns, mark))
	assert.False(t, slices.ContainsFunc(startsSince(ns, mark), func(s controlplane.PodEvent) bool { return s.Gated }))
}

// A rollout can finish — the node Ready on its new target — while no
// sequencer runs to record it. Its pods lost then together with its
// predecessors' come back after them: the rollout still counts as under way,
// and a rollout under way is held at its new pods by a predecessor that does
// not itself wait for it.
func TestARolloutFinishedWhileNoSequencerRanRecoversAfterItsPredecessors(t *testing.T) {
	ns := convergedWhileNoSequencerRuns(t, 5, "fe3", "fe1 fe2 be fe3")
	fe3 := node(ns, "fe3")
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(fe3), fe3))
	require.Equal(t, v2alpha1.ReasonReleased, condition(fe3).Reason, "nothing recorded the rollout complete")

	recovery := len(startedIn(ns))
	evict(t, ns, "fe4", "fe3", "fe2", "fe1", "be")
	startSequencer(t)
	waitSettled(t, ns, 5)
	assert.Regexp(t, `^be fe1 fe2 fe3 fe4( fe4)?$`, startedSince(ns, recovery),
		"fe4's old pods may start once fe3 is Ready, before fe4 rolls")
	assertEachStartedAfterThePreviousWasReady(t, ns, recovery)
}

// convergedWhileNoSequencerRuns settles a tenant of size nodes, changes it
// whole to v2 with node k stuck, waits until the pods of the nodes in
// started (k last) have started, stops the sequencer and lets k's pods
// become Ready: k's rollout converges with nothing recording it. It
// returns the namespace.
func convergedWhileNoSequencerRuns(t *testing.T, size int, k, started string) string {
	t.Helper()
	stop := startSequencer(t)
	ns, mark := settledTenant(t, size)
	stick(ns, k)
	setVersion(t, ns, v2, keys(size)...)
	require.True(t, waitFor(30*time.Second, func() bool { return startedSince(ns, mark) == started }), startedSince(ns, mark))
	stop()
	unstick(t, ns, k)
	require.True(t, waitFor(10*time.Second, func() bool {
		var now corev1.PodList
		_ = harness.Client.List(context.Background(), &now, client.InNamespace(ns), client.MatchingLabels{v2alpha1.LabelNode: "acme-" + k})
		return len(now.Items) > 0 && !slices.ContainsFunc(now.Items, func(p corev1.Pod) bool { return !podReady(p) })
	}), "%s becomes Ready on its new target", k)
	return ns
}

func podReady(p corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// The record that a node's rollout is complete never lags a release that
// relies on it: once its pods are gone, that record is what says the
// rollout was done. The release writes it itself, in the patch that removes
// the gate (released-after: fe1's release, by UID and generation, in fe2's
// release; fe3's in fe4's). One watch of the Frontends delivers the writes
// as the API server made them; the RolloutComplete conditions follow.
func TestAReleaseRecordsTheConvergedRolloutsItReliesOn(t *testing.T) {
	startSequencer(t)
	ns, _ := settledTenant(t, 5)
	wc, err := client.NewWithWatch(harness.Config, client.Options{Scheme: harness.Client.Scheme()})
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	w, err := wc.Watch(ctx, &v2alpha1.FrontendList{}, client.InNamespace(ns))
	require.NoError(t, err)
	defer w.Stop()
	setVersion(t, ns, v2, keys(5)...)

	latest := map[string]*v2alpha1.Frontend{}
	released := map[string]bool{}
	for len(released) < 4 {
		ev, ok := <-w.ResultChan()
		require.True(t, ok, "the watch ended before every frontend was released; released: %v", released)
		fe, ok := ev.Object.(*v2alpha1.Frontend)
		require.True(t, ok, "watch event %s: %v", ev.Type, ev.Object)
		latest[fe.Name] = fe
		if released[fe.Name] || v2alpha1.IsGated(fe) || fe.Spec.ExpressVersion != v2 {
			continue
		}
		released[fe.Name] = true
		before := map[string]string{"acme-fe2": "acme-fe1", "acme-fe4": "acme-fe3"}[fe.Name]
		if before == "" {
			continue
		}
		prev := latest[before]
		require.NotNil(t, prev, "%s released before any write of %s was seen", fe.Name, before)
		require.Equal(t, v2, prev.Spec.ExpressVersion)
		var after map[string]string
		require.NoError(t, json.Unmarshal([]byte(fe.Annotations[v2alpha1.AnnotationReleasedAfter]), &after),
			"%s's release carries a %s record", fe.Name, v2alpha1.AnnotationReleasedAfter)
		assert.Equal(t, string(prev.UID)+"/"+prev.Annotations[v2alpha1.AnnotationReleasedGeneration], after[before],
			"%s's release records %s's release for %s as converged", fe.Name, before, v2)
	}
	for _, fe := range []string{"acme-fe1", "acme-fe3"} {
		assert.Eventually(t, func() bool {
			n := &v2alpha1.Frontend{}
			err := harness.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fe}, n)
			return err == nil && condition(n) != nil && condition(n).Reason == v2alpha1.ReasonRolloutComplete
		}, 30*time.Second, 50*time.Millisecond, "%s's condition says RolloutComplete", fe)
	}
}
