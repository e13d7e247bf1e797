package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Faults while a change to all rolls on three replicas per node, judged by
// the black-box oracle of order_oracle_test.go: no release and no pod
// start may rest on a predecessor that was not Ready. The tenant's pods take
// slowReady to become Ready, so that an outage outlasts the oracle's slack
// (the time between a decision's read and the oracle seeing its write):
// with the pod rule disabled, the oracle fails both tests. Faults shorter
// than that slack (readiness probes flapping, pods deleted every 0.7 s)
// were tried and held, but the oracle cannot tell a decision taken on a
// read just before such a fault from one taken wrongly.

// slowReady is how long the pods of a faults tenant take to become Ready.
const slowReady = 2500 * time.Millisecond

// slowTenant creates a settled tenant of 4 nodes × 3 replicas whose pods
// take slowReady to become Ready.
func slowTenant(t *testing.T) string {
	t.Helper()
	ns := namespace(t)
	replicas.set(ns, 3)
	readyAfter.set(ns, slowReady)
	createNodes(t, ns, 4)
	waitSettled(t, ns)
	return ns
}

// deletePods deletes the pods of ns called names; their StatefulSets
// create them again under the same names.
func deletePods(t *testing.T, ns string, names ...string) {
	t.Helper()
	for _, name := range names {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		require.NoError(t, client.IgnoreNotFound(harness.Client.Delete(context.Background(), p)))
	}
}

// changeAllWatched changes every node of a slowTenant to v2, watched by
// the oracle from then on; it returns the namespace, the oracle's log and
// when the change began.
func changeAllWatched(ctx context.Context, t *testing.T) (string, *orderLog, time.Time) {
	t.Helper()
	ns := slowTenant(t)
	log := watchOrder(ctx, t, ns)
	mark := time.Now()
	setVersion(t, ns, v2, keys(4)...)
	return ns, log, mark
}

// Two of be's three pods lost as fe1 is released for a change to all; as
// fe2 is, be loses another and fe1 one. Each comes back under its name.
func TestReplicasLostAsFe1AndFe2AreReleasedKeepTheOrder(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, log, mark := changeAllWatched(ctx, t)
	waitReleased(t, ns, "fe1")
	deletePods(t, ns, "acme-be-1", "acme-be-2")
	waitReleased(t, ns, "fe2")
	deletePods(t, ns, "acme-be-0", "acme-fe1-0")
	waitSettled(t, ns)
	t.Logf("starts: %s", starts(ns, mark))
	checkOrder(t, log.snapshot(), mark, 3)
}

// The sequencer stops while fe2 rolls a change to all, be and fe1 each
// lose a pod meanwhile (the pod webhook decides alone), and it starts
// again.
func TestASequencerStoppedWhilePodsAreLostKeepsTheOrderWhenItStartsAgain(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, log, mark := changeAllWatched(ctx, t)
	waitReleased(t, ns, "fe2")
	stopSequencer()
	running := false
	defer func() {
		if !running {
			assert.NoError(t, startSequencer())
		}
	}()
	deletePods(t, ns, "acme-be-0", "acme-fe1-1")
	time.Sleep(3 * time.Second) // the StatefulSets recreate them; the pod webhook alone decides
	require.NoError(t, startSequencer())
	running = true
	waitSettled(t, ns)
	t.Logf("starts: %s", starts(ns, mark))
	checkOrder(t, log.snapshot(), mark, 3)
}
