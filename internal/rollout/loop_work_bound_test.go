package rollout

import (
	"fmt"
	"strings"
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

// A loop search that runs out of its steps (maxLoopSearchSteps) with the
// pass's budget left keeps its wait, as one past the budget does, and is
// noted: 20 nodes whose every upgrade list names every other node, the
// backend crash-looping, need searches longer than that bound and stay
// within the budget (BenchmarkPlan).
func TestALoopSearchThatRunsOutOfItsStepsIsNotedThoughThePassHasBudgetLeft(t *testing.T) {
	w := denseTenant(t, 20)
	p := newPlanner(w.snapshot())
	p.findWaits()
	require.False(t, p.outOfLoopBudget(), "within the budget: %d", p.loopWork)
	assert.True(t, p.loopsUnsure(), "a search ran out of its %d steps", maxLoopSearchSteps)
}

// Every decision of a pass says why its loop searches were cut short, as
// the sequencer's express_sequencer_tenants_loops_unsure gauge counts it:
// nothing where every search ended (5 dense nodes), a search out of its
// steps (20), the pass out of its budget (200).
func TestEveryDecisionOfAPassSaysWhyItsLoopSearchesWereCutShort(t *testing.T) {
	for _, c := range []struct {
		name string
		plan func(t *testing.T) []Decision
		why  string
	}{
		{"5 nodes whose every list names every other are searched to the end", func(t *testing.T) []Decision {
			s := denseTenant(t, 5).snapshot()
			p := newPlanner(s)
			p.findWaits()
			require.Positive(t, p.loopWork, "loops were searched")
			return Plan(s)
		}, ""},
		{"20 nodes whose every list names every other run a search out of its steps", func(t *testing.T) []Decision { return Plan(denseTenant(t, 20).snapshot()) }, LoopsOutOfSteps},
		{"200 such nodes run the pass out of its budget", func(t *testing.T) []Decision { return Plan(denseTenant(t, 200).snapshot()) }, LoopsOutOfBudget},
	} {
		t.Run(c.name, func(t *testing.T) {
			decisions := c.plan(t)
			require.NotEmpty(t, decisions)
			for _, d := range decisions {
				assert.Equal(t, c.why, d.LoopsUnsure, d.Node)
			}
		})
	}
}

// fe2 rolling a change to all when the backend, gated for the same change
// and waiting for fe2, crashes and fe2's pods are lost: be's readiness
// waits for fe2, so fe2's new pods start (the half-done rollout finishes
// first). A pass whose loop searches answered no without trying every way
// makes no such exception: a wait kept for want of a search is one more
// way be's readiness may wait for fe2, and a search without bound could
// drop it — be going first by the provisioning order, fe2's pods held for
// it — so fe2's pods wait for be.
func TestAPassWhoseLoopSearchesAreUnsureHoldsThePodsOfARolloutInFlightForItsPredecessors(t *testing.T) {
	w := newWorld(t, "acme")
	mark := settledTenant(w, 5)
	w.setVersion(v2, keysOf(5)...)
	for !strings.HasSuffix(w.startedSince(mark), "fe2") {
		w.step()
	}
	w.crash("be")
	w.evict("fe2")
	fe2, be := w.name("fe2"), w.name("be")
	require.NotEmpty(t, w.pods[fe2])
	for i := range w.pods[fe2] { // as the pod webhook's read by name holds them
		w.pods[fe2][i].Gates = []string{v2alpha1.GateSequencer}
	}
	s := w.snapshot()
	require.True(t, s.inFlight(fe2))
	require.False(t, s.isReady(be))

	p := newPlanner(s)
	p.findWaits()
	require.False(t, p.loopsUnsure())
	ok, _ := p.podsMayStart(fe2, nil)
	require.True(t, ok, "be waits for fe2's rollout: its pods start")
	require.NotEmpty(t, p.decide(fe2).PodsToRelease)

	p = newPlanner(s)
	p.unsure = true // a search ran out of its steps (above)
	p.findWaits()
	ok, blockers := p.podsMayStart(fe2, nil)
	assert.False(t, ok, "fe2's pods wait for be")
	assert.NotEmpty(t, blockers)
	d := p.decide(fe2)
	assert.Equal(t, v2alpha1.ReasonRolloutPodsHeld, d.Condition.Reason)
	assert.Contains(t, d.Condition.Message, "longer than one pass searches", "and it says why they are not let start")
	assert.True(t, p.decide(be).Gated, "be waits for fe2 (a cost to progress: ignore-prerequisites on fe2 lets its pods start)")
}

// The default lists of a tenant of 200 nodes, a change to all just
// admitted and the backend crash-looping (with, or without, its upgrade
// list naming the last frontend): every loop search ends within its steps,
// so the exception for a rollout in flight stays open to such tenants.
func TestTheDefaultListsOf200NodesWithACrashAreSearchedToTheEnd(t *testing.T) {
	for _, loop := range []bool{false, true} {
		w := newWorld(t, "acme")
		w.tenant(200, "v1")
		everyNodeReleasedAndReady(w)
		keys := keysOf(200)
		w.setVersion("v2", keys...)
		if loop {
			w.update("be", func(n v2alpha1.Node) {
				n.NodeSpec().DeploymentDependencies.UpgradePrerequisites = []v2alpha1.Prerequisite{prereqOf(w, "fe199")}
			})
		}
		w.crash("be")
		p := newPlanner(w.snapshot())
		p.findWaits()
		assert.Positive(t, p.loopWork, "loop=%v: the crash makes loops to search", loop)
		assert.False(t, p.loopsUnsure(), "loop=%v: every search ended within its steps (%d waits looked at)", loop, p.loopWork)
	}
}
