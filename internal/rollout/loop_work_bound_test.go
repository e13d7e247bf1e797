package rollout

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// denseTenant is a tenant of size nodes, each released and Ready on v1,
// every upgrade list naming every other node (loops of upgrade waits
// through every pair: lists the validating webhook refuses, which a
// tenant made before it was installed may still carry), changed to v2
// with the backend crash-looping: every wait is circular through the
// backend's readiness.
func denseTenant(t testing.TB, size int) *world {
	w := newWorld(t, "acme")
	w.tenant(size, "v1")
	everyNodeReleasedAndReady(w)
	keys := make([]string, 0, size)
	for i := range size {
		keys = append(keys, map[bool]string{true: "be", false: fmt.Sprintf("fe%d", i)}[i == 0])
	}
	w.setVersion("v2", keys...)
	everyUpgradeListNamesEveryOther(w, keys)
	w.crash("be")
	return w
}

// everyNodeReleasedAndReady releases every node of w for its target, with
// one pod Ready on it (of version v1).
func everyNodeReleasedAndReady(w *world) {
	for name, n := range w.nodes {
		hash := n.GetAnnotations()[v2alpha1.AnnotationTargetHash]
		n.GetAnnotations()[v2alpha1.AnnotationReleasedTarget] = hash
		n.NodeSpec().RolloutGates = nil
		w.pods[name] = []Pod{{Name: name + "-0", Version: "v1", Hash: hash,
			Conditions: map[string]string{string(corev1.PodReady): string(corev1.ConditionTrue)}}}
		w.setCurrent[name] = hash
	}
}

// everyUpgradeListNamesEveryOther sets the upgrade list of each node of
// keys to every other node of keys.
func everyUpgradeListNamesEveryOther(w *world, keys []string) {
	for _, k := range keys {
		w.update(k, func(n v2alpha1.Node) {
			var list []v2alpha1.Prerequisite
			for _, o := range keys {
				if o != k {
					list = append(list, prereqOf(w, o))
				}
			}
			n.NodeSpec().DeploymentDependencies.UpgradePrerequisites = list
		})
	}
}

// A pass's loop searches stop at a budget of work (maxLoopWorkPerPlan):
// 200 nodes whose every wait is circular ask for more (tens of thousands
// of searches of a graph of tens of thousands of waits; it took minutes).
// Past the budget a wait is kept, never dropped: no node is released, the
// crash-looping backend included, whose recovery would go first by the
// provisioning order. 20 such nodes stay within it, and the backend goes
// first, as DESIGN §4 asks of a crashed node.
func TestAPassThatRunsOutOfItsLoopSearchBudgetKeepsEveryWaitItDidNotSearch(t *testing.T) {
	for _, c := range []struct {
		size       int
		beReleased bool
	}{{20, true}, {200, false}} {
		t.Run(fmt.Sprintf("%d nodes", c.size), func(t *testing.T) {
			w := denseTenant(t, c.size)
			p := newPlanner(w.snapshot()) // Plan, its budget in sight
			p.findWaits()
			p.chooseReleases()
			assert.Equal(t, c.beReleased, p.loopWork < maxLoopWorkPerPlan, "searched within the budget: %d", p.loopWork)
			var decisions []Decision
			var released []string
			for _, name := range p.names {
				d := p.decide(name)
				decisions = append(decisions, d)
				if !d.Gated {
					released = append(released, d.Node)
				}
			}
			if c.beReleased {
				require.Equal(t, []string{w.name("be")}, released, "the crashed backend goes first, alone")
				return
			}
			assert.Empty(t, released)
			d := decisionOf(t, decisions, w.name("be"))
			assert.Contains(t, []string{v2alpha1.ReasonDependencyCycle, v2alpha1.ReasonWaitingForPrerequisite}, d.Condition.Reason, d.Condition.Message)
			t.Log(d.Condition.Reason, ": ", d.Condition.Message[:min(300, len(d.Condition.Message))])
		})
	}
}

// Past the budget, the exception that lets a rollout in flight start its
// pods while a predecessor is not Ready (that predecessor's readiness may
// wait for the rollout) is not made either: it rests on the loops the
// searches would have found. be, crash-looping, names every frontend but
// fe5 in its upgrade list; fe5, released for v2, has a new pod held. A
// search without bound lets be go first and holds fe5's pod for be Ready;
// with the waits kept, fe5's pod was let go while be was down (DESIGN §4).
func TestAPassOutOfItsLoopSearchBudgetHoldsThePodsOfARolloutInFlightForItsPredecessors(t *testing.T) {
	const size = 200
	w := denseTenant(t, size)
	fe5, be := w.name("fe5"), w.name("be")
	w.update("be", func(n v2alpha1.Node) {
		var list []v2alpha1.Prerequisite
		for i := 1; i < size; i++ {
			if i != 5 {
				list = append(list, prereqOf(w, fmt.Sprintf("fe%d", i)))
			}
		}
		n.NodeSpec().DeploymentDependencies.UpgradePrerequisites = list
	})
	n := w.nodes[fe5]
	n.GetAnnotations()[v2alpha1.AnnotationReleasedTarget] = StampedTarget(n)
	n.NodeSpec().RolloutGates = nil
	w.pods[fe5] = []Pod{{Name: fe5 + "-0", Version: "v2", Hash: StampedTarget(n), Gates: []string{v2alpha1.GateSequencer},
		Conditions: map[string]string{string(corev1.PodReady): string(corev1.ConditionFalse)}}}
	s := w.snapshot()
	require.True(t, s.inFlight(fe5))
	require.False(t, s.isReady(be))

	p := newPlanner(s)
	p.findWaits()
	require.True(t, p.outOfLoopBudget(), "the searches ran out: %d", p.loopWork)
	d := p.decide(fe5)
	assert.Empty(t, d.PodsToRelease, "fe5's pod waits for be Ready: %s", d.Condition.Message)
	assert.True(t, p.decide(be).Gated)
	assert.Contains(t, p.decide(be).Condition.Message, "more loops than one pass searches")
}
