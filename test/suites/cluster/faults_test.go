package cluster

import (
	"context"
	"math/rand"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// Faults while a change to all rolls on three replicas per node, judged by
// the black-box oracle of order_oracle_test.go: no release and no pod
// start may rest on a predecessor that was not Ready.

// every runs fault against one pod of nodes (chosen among those pick
// accepts) every period until ctx ends.
func every(ctx context.Context, t *testing.T, ns string, nodes []string, period time.Duration, pick func(corev1.Pod) bool, fault func(corev1.Pod) error) {
	rnd := rand.New(rand.NewSource(1))
	tick := time.NewTicker(period)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var list corev1.PodList
		if harness.Client.List(ctx, &list, client.InNamespace(ns)) != nil {
			continue
		}
		candidates := slices.DeleteFunc(list.Items, func(p corev1.Pod) bool {
			return !slices.Contains(nodes, p.Labels[v2alpha1.LabelNode]) || p.DeletionTimestamp != nil || !pick(p)
		})
		if len(candidates) == 0 {
			continue
		}
		if err := fault(candidates[rnd.Intn(len(candidates))]); client.IgnoreNotFound(err) != nil && ctx.Err() == nil {
			t.Logf("fault: %v", err)
		}
	}
}

func podReady(p corev1.Pod) bool {
	return slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
}

// notReady turns a pod not Ready through its status, as a failing
// readiness probe does; KWOK makes it Ready again about a second later.
func notReady(p corev1.Pod) error {
	before := p.DeepCopy()
	for i := range p.Status.Conditions {
		if c := &p.Status.Conditions[i]; c.Type == corev1.PodReady || c.Type == corev1.ContainersReady {
			c.Status, c.LastTransitionTime = corev1.ConditionFalse, metav1.Now()
		}
	}
	return harness.Client.Status().Patch(context.Background(), &p, client.MergeFrom(before))
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

// changeAllUnder changes every node of a settled 4-node tenant of three
// replicas to v2 while fault runs every period on be, fe1 and fe2, until
// fe3 is released; then checks the order.
func changeAllUnder(t *testing.T, period time.Duration, pick func(corev1.Pod) bool, fault func(corev1.Pod) error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := settledTenant(t, 4, 3)
	log := watchOrder(ctx, t, ns)
	faults, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { every(faults, t, ns, []string{"acme-be", "acme-fe1", "acme-fe2"}, period, pick, fault) })
	mark := time.Now()
	setVersion(t, ns, v2, keys(4)...)
	fe3 := node(ns, "fe3")
	released := waitFor(2*time.Minute, func() bool {
		return harness.Client.Get(ctx, client.ObjectKeyFromObject(fe3), fe3) == nil && !v2alpha1.IsGated(fe3)
	})
	stop()
	wg.Wait()
	require.True(t, released, "fe3 released")
	waitSettled(t, ns)
	t.Logf("starts: %s", starts(ns, mark))
	checkOrder(t, log.snapshot(), mark, 3)
}

func TestReadinessProbesFlappingDuringAChangeToAllKeepTheOrder(t *testing.T) {
	changeAllUnder(t, 1200*time.Millisecond, podReady, notReady)
}

func TestPodsDeletedOneByOneDuringAChangeToAllKeepTheOrder(t *testing.T) {
	changeAllUnder(t, 700*time.Millisecond, func(p corev1.Pod) bool { return p.Spec.NodeName != "" }, func(p corev1.Pod) error {
		return harness.Client.Delete(context.Background(), &p)
	})
}

// Two of be's three pods lost as fe1 is released for a change to all; as
// fe2 is, be loses another and fe1 one. Each comes back under its name.
func TestReplicasLostAsFe1AndFe2AreReleasedKeepTheOrder(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := settledTenant(t, 4, 3)
	log := watchOrder(ctx, t, ns)
	mark := time.Now()
	setVersion(t, ns, v2, keys(4)...)
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
	ns := settledTenant(t, 4, 3)
	log := watchOrder(ctx, t, ns)
	mark := time.Now()
	setVersion(t, ns, v2, keys(4)...)
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
