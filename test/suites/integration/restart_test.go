package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
)

// noRolloutFor fails the test if the operator starts a rollout in ns within d.
func noRolloutFor(t *testing.T, ns string, d time.Duration) {
	t.Helper()
	mark := len(startedIn(ns))
	time.Sleep(d)
	assert.Equal(t, "", startedSince(ns, mark), "nothing is released while the sequencer is down")
}

// The controller-down cases: the sequencer is stopped, the tenant changes,
// the sequencer starts again. The webhooks keep serving throughout (they run
// on every replica), so every target change is gated while it is down.
func TestWhileTheSequencerIsDown(t *testing.T) {
	t.Run("a change to all nodes waits for it and is then rolled in order", func(t *testing.T) {
		stop := startSequencer(t)
		ns, mark := settledTenant(t, 5)
		stop()

		setVersion(t, ns, v2, keys(5)...)
		noRolloutFor(t, ns, time.Second)

		startSequencer(t)
		waitSettled(t, ns, 5)
		assert.Equal(t, "fe1 fe2 be fe3 fe4", startedSince(ns, mark))
	})

	t.Run("a rollout stopped half way resumes in order and releases nothing early", func(t *testing.T) {
		stop := startSequencer(t)
		ns, mark := settledTenant(t, 5)
		stick(ns, "fe1") // fe1 is not Ready, and fe2 not released, until the sequencer is stopped
		setVersion(t, ns, v2, keys(5)...)
		require.True(t, waitFor(10*time.Second, func() bool { return startedSince(ns, mark) != "" }))
		stop()
		unstick(t, ns, "fe1")

		noRolloutFor(t, ns, time.Second) // fe1 finishes; fe2 stays gated
		assert.Equal(t, "fe1", startedSince(ns, mark))

		startSequencer(t)
		waitSettled(t, ns, 5)
		assert.Equal(t, "fe1 fe2 be fe3 fe4", startedSince(ns, mark))
	})

	t.Run("nodes deleted, added, updated and crashed meanwhile converge", func(t *testing.T) {
		stop := startSequencer(t)
		ns, mark := settledTenant(t, 5)
		stop()

		require.NoError(t, harness.Client.Delete(context.Background(), node(ns, "fe4")))
		fe5 := node(ns, "fe5")
		*fe5.NodeSpec() = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "acme"}, ExpressVersion: v2}
		require.NoError(t, harness.Client.Create(context.Background(), fe5))
		setVersion(t, ns, v2, "fe1", "fe2")
		noRolloutFor(t, ns, time.Second)
		// A crash of a node the sequencer released long ago needs no
		// sequencer: its pod deleted, its StatefulSet recreates it, and
		// its predecessors are Ready.
		crash(t, ns, "fe3")
		mend(t, ns)
		require.True(t, waitFor(10*time.Second, func() bool { return startedSince(ns, mark) == "fe3" }))
		mark++

		startSequencer(t)
		require.True(t, waitFor(30*time.Second, func() bool {
			n := node(ns, "fe5")
			return harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n) == nil && condition(n) != nil &&
				condition(n).Reason == v2alpha1.ReasonRolloutComplete
		}))
		for _, k := range []string{"be", "fe1", "fe2", "fe3"} {
			n := node(ns, k)
			require.True(t, waitFor(30*time.Second, func() bool {
				return harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n) == nil && condition(n) != nil &&
					condition(n).Reason == v2alpha1.ReasonRolloutComplete && !v2alpha1.IsGated(n)
			}), k)
		}
		// fe5 is new: it is provisioned as soon as be, fe1, fe2 and fe3 are
		// Ready, which they are (on their old version) when the sequencer
		// starts; the upgrade of fe1 and fe2 keeps its order.
		started := strings.Fields(startedSince(ns, mark))
		assert.ElementsMatch(t, []string{"fe1", "fe2", "fe5"}, started)
		assert.Less(t, slices.Index(started, "fe1"), slices.Index(started, "fe2"), "fe1 is upgraded before fe2")
		var pods corev1.PodList
		require.NoError(t, harness.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{v2alpha1.LabelNode: "acme-fe4"}))
		assert.Empty(t, pods.Items, "the deleted frontend's pods are gone")
	})

	t.Run("a node taken down and a change to all are rolled without it", func(t *testing.T) {
		stop := startSequencer(t)
		ns, mark := settledTenant(t, 5)
		stop()

		setUp(t, ns, false, "fe2")
		setVersion(t, ns, v2, keys(5)...)
		noRolloutFor(t, ns, time.Second)

		startSequencer(t)
		waitSettled(t, ns, 5)
		assert.Equal(t, "fe1 be fe3 fe4", startedSince(ns, mark))
	})
}

func TestAnotherReplicaTakesOverWhenTheLeaderStops(t *testing.T) {
	id := "rollout-leader-test"
	elect := func(o *app.Options) {
		o.LeaderElect = true
		o.LeaderElectionID = id
		o.LeaderElectionNS = "default"
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 2*time.Second, 1500*time.Millisecond, 200*time.Millisecond
	}
	stopFirst := startSequencer(t, elect)
	ns := namespace(t)
	createTenant(t, ns, 5, nil)
	waitSettled(t, ns, 5) // the first replica leads: nothing else runs yet
	startSequencer(t, elect)

	mark := len(startedIn(ns))
	setVersion(t, ns, v2, keys(5)...)
	require.True(t, waitFor(10*time.Second, func() bool { return startedSince(ns, mark) != "" }))
	stopFirst() // the leader goes away mid-rollout and releases its lease

	waitSettled(t, ns, 5)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", startedSince(ns, mark), "each node rolled once, in order")
}
