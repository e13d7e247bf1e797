package rollout

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/medallia/express-sequencer/cmd/express-sequencer/app"
	"github.com/medallia/express-sequencer/test/simoperator"
)

// Recovery is ordered at the pods (DESIGN v2 §4b): pods recreated with no
// delay anywhere — a StatefulSet after a node failure — are held
// scheduling-gated until their node's provisioning-predecessors are Ready.

// evict deletes every pod of the nodes in the same instant and recreates
// them at once, in the order given.
func evict(t *testing.T, ns string, keys ...string) {
	t.Helper()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = "acme-" + k
	}
	require.NoError(t, op.Evict(context.Background(), harness.Client, ns, names...))
}

// startsSince returns the starts in ns after mark.
func startsSince(ns string, mark int) []simoperator.Start {
	var out []simoperator.Start
	for _, s := range op.Started() {
		if s.Namespace == ns {
			out = append(out, s)
		}
	}
	return out[mark:]
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
	op.Stick(ns, "acme-be") // the backend's new pod never becomes Ready…
	evict(t, ns, "be")
	evict(t, ns, "fe3") // …so a frontend pod created meanwhile must wait
	time.Sleep(2 * time.Second)
	starts := startsSince(ns, mark)
	require.Len(t, starts, 1, "only the backend started: %v", starts)
	assert.Equal(t, "acme-be", starts[0].Node)
	op.Unstick(ns, "acme-be")
	evict(t, ns, "be")
	waitSettled(t, ns, 5)
	assert.Equal(t, "be be fe3", startedSince(ns, mark))
	assertEachStartedAfterThePreviousWasReady(t, ns, mark+1)
}

func TestAPodRecreatedInAReleasedRolloutIsNotGated(t *testing.T) {
	startSequencer(t)
	ns, mark := settledTenant(t, 5)
	op.Stick(ns, "acme-fe1")
	setVersion(t, ns, v2, keys(5)...)
	require.True(t, waitFor(10*time.Second, func() bool { return startedSince(ns, mark) == "fe1" }))
	evict(t, ns, "fe1") // fe1 is released, rolling, not converged
	starts := startsSince(ns, mark)
	require.Len(t, starts, 2)
	assert.False(t, starts[1].Gated, "a half-done rollout is never frozen")
	op.Unstick(ns, "acme-fe1")
	evict(t, ns, "fe1")
	waitSettled(t, ns, 5)
	assert.Equal(t, "fe1 fe1 fe1 fe2 be fe3 fe4", startedSince(ns, mark))
	assert.False(t, slices.ContainsFunc(startsSince(ns, mark), func(s simoperator.Start) bool { return s.Gated }))
}
