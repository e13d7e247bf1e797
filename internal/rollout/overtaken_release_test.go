package rollout

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// overtakenFe3 builds a 4-node tenant where fe3 was released for v2
// while another system's gate held its operator (pods still on v1), then
// reverted to v1 and set to v2 again before any pass (gated, target ==
// released), its pods then lost (only its StatefulSet's template says v1),
// and be gated for a third version and paused.
func overtakenFe3(t *testing.T) *world { return overtakenFe3With(t, true) }

// overtakenFe3With is overtakenFe3, fe3's pods lost or not.
func overtakenFe3With(t *testing.T, lose bool) *world {
	w := newWorld(t, "acme")
	settled(4)(w)
	w.toggleOtherSystemsGate("fe3")
	w.setVersion(v2, keysOf(4)...)
	w.stepUntilReleased("fe3")
	w.setVersion(v1, "fe3")
	w.setVersion(v2, "fe3")
	fe3 := w.nodes[w.name("fe3")]
	require.True(t, Gated(fe3))
	require.Equal(t, ReleasedTarget(fe3), StampedTarget(fe3))
	if lose {
		w.lose("fe3")
	}
	w.annotate("be", v2alpha1.AnnotationPauseRollout, "true")
	w.setVersion("express-e689.160", "be")
	return w
}

// The preview (kubectl express plan) holds a node whose overtaken release
// only its StatefulSet's template shows (its pods lost), as the sequencer
// does on the same snapshot: it once predicted it by the provisioning
// order, its simulation leaving the templates out.
func TestThePreviewHoldsAnOvertakenNodeWithLostPodsAsPlanDoes(t *testing.T) {
	w := overtakenFe3(t)
	s := w.snapshot()
	require.True(t, s.runsAnotherTarget(w.name("fe3")), "the fresh read sees fe3's template on v1")

	d := decisionFor(t, w, "fe3")
	assert.True(t, d.Gated, "Plan holds fe3: %s", d.Condition.Message)
	assert.Equal(t, ModeUpgrade, d.Mode)

	p := Preview(s)
	var first []string
	if len(p.Steps) > 0 {
		first = p.Steps[0].Nodes
	}
	assert.NotContains(t, first, w.name("fe3"),
		"the preview releases fe3 first (modes %v) while Plan holds it: %s", p.Steps, d.Condition.Message)

	// The same with fe3's pods still there (on v1): the preview agrees, the
	// pods being copied into its simulation.
	w = overtakenFe3With(t, false)
	p = Preview(w.snapshot())
	first = nil
	if len(p.Steps) > 0 {
		first = p.Steps[0].Nodes
	}
	assert.NotContains(t, first, w.name("fe3"), "with its pods: %v", p.Steps)
	assert.True(t, decisionFor(t, w, "fe3").Gated)
}

// A second StatefulSet naming the node, scaled to 0, its template on an
// older target (an operator that keeps the previous one, blue/green; an
// orphan left by kubectl delete --cascade=orphan) runs nothing: a node
// brought back up: true with the target it was released for is a recovery
// (DESIGN §4, provisioning), not held in the upgrade order behind a paused
// Backend.
func TestALeftoverStatefulSetScaledToZeroDoesNotTurnAComebackIntoAnUpgrade(t *testing.T) {
	w := newWorld(t, "acme")
	settled(4)(w)
	v1hash := StampedTarget(w.nodes[w.name("fe3")])
	w.update("fe3", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
	w.run(50)
	w.annotate("be", v2alpha1.AnnotationPauseRollout, "true")
	w.setVersion("express-e689.160", "be")
	w.update("fe3", func(n v2alpha1.Node) { n.NodeSpec().Up = nil })
	fe3 := w.nodes[w.name("fe3")]
	require.True(t, Gated(fe3))
	require.Equal(t, ReleasedTarget(fe3), StampedTarget(fe3))

	without := decisionFor(t, w, "fe3")
	assert.False(t, without.Gated, "without a leftover: released by the provisioning order: %s", without.Condition.Message)

	leftover := appsv1.StatefulSet{}
	leftover.UID = types.UID("leftover")
	leftover.Spec.Replicas = ptr.To[int32](0)
	leftover.Spec.Template.Labels = map[string]string{v2alpha1.LabelNode: w.name("fe3"), v2alpha1.LabelTargetHash: v1hash + "x"}
	s := w.snapshot()
	s.SetTemplates = setTemplates(append(w.statefulSets(), leftover), w.nodes)
	d := decisionOf(t, Plan(s), w.name("fe3"))
	assert.False(t, d.Gated, "with a leftover StatefulSet scaled to 0: %s mode, %s", d.Mode, d.Condition.Message)
}

// The cache snapshot (no StatefulSets) decides an overtaken node with lost
// pods by the provisioning order and would release it; PlanOnFreshest then
// plans on the fresh read, which holds it.
func TestTheCachePlanOfAnOvertakenNodeIsDecidedAgainOnTheFreshRead(t *testing.T) {
	w := overtakenFe3(t)
	fresh := w.snapshot()
	cached := w.snapshot()
	cached.SetTemplates, cached.SetsConverged, cached.SetRevisions, cached.MissingPods = nil, nil, nil, nil
	assert.Equal(t, ModeProvisioning, cached.mode(w.name("fe3")), "the cache cannot tell")
	snap, decisions, wasFresh, err := PlanOnFreshest(cached, func() (*Snapshot, error) { return fresh, nil })
	require.NoError(t, err)
	assert.True(t, wasFresh, "read fresh")
	assert.Same(t, fresh, snap)
	d := decisionOf(t, decisions, w.name("fe3"))
	assert.True(t, d.Gated, "held on the fresh read: %s", d.Condition.Message)
}

// Random scenarios aimed at overtaken releases: default lists or the old
// chart's, 3–5 nodes,
// other systems' gates toggled often, versions flipping among three
// (reverts most of the time), pods lost, crashes, up toggled (alone, and
// with a version in the same write, both ways), pauses —
// every release checked by the world's oracle, and the tenant settles once
// the holds are lifted.
func TestReleasesOvertakenByRevertsHoldTheirRequirementsInRandomScenarios(t *testing.T) {
	versions := []string{v1, v2, "express-e689.160"}
	scenarios := uint64(3000)
	if testing.Short() {
		scenarios = 500
	}
	for seed := uint64(1); seed <= scenarios; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0xfeed))
		w := newWorld(t, "t")
		w.rng = rng
		w.logf("scenario seed %d", seed)
		size := 3 + rng.IntN(3)
		keys := keysOf(size)
		if rng.IntN(2) == 0 {
			oldChart(size)(w) // a frontend's provisioning names one node, not every node before it
		} else {
			w.tenant(size, v1)
		}
		w.run(1000)
		for range 3 + rng.IntN(6) {
			switch op := rng.IntN(12); op {
			case 11:
				// A version and up: true in one write (a render that
				// brings a node back up).
				v := versions[rng.IntN(len(versions))]
				w.update(keys[rng.IntN(size)], func(n v2alpha1.Node) { n.NodeSpec().ExpressVersion = v; n.NodeSpec().Up = nil })
			case 10:
				// Rolled back (or forward) and taken down in one write:
				// a release not carried out yet, overtaken, its
				// StatefulSet scaled to 0 on the template it had.
				k := keys[rng.IntN(size)]
				v := versions[rng.IntN(len(versions))]
				w.update(k, func(n v2alpha1.Node) { n.NodeSpec().ExpressVersion = v; n.NodeSpec().Up = ptr.To(false) })
			case 0, 1:
				w.toggleOtherSystemsGate(randomSubset(rng, liveKeys(w, keys))...)
			case 2, 3, 4:
				w.setVersion(versions[rng.IntN(len(versions))], randomSubset(rng, keys)...)
			case 5:
				w.lose(randomSubset(rng, liveKeys(w, keys))...)
			case 6:
				w.crash(randomSubset(rng, liveKeys(w, keys))...)
			case 7:
				k := keys[rng.IntN(size)]
				w.update(k, func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(!n.NodeSpec().IsUp()) })
			case 8:
				for _, k := range randomSubset(rng, liveKeys(w, keys)) {
					paused := annotated(w.nodes[w.name(k)], v2alpha1.AnnotationPauseRollout)
					w.annotate(k, v2alpha1.AnnotationPauseRollout, map[bool]string{false: "true"}[paused])
				}
			case 9:
				w.evict(randomSubset(rng, liveKeys(w, keys))...)
			}
			for i := rng.IntN(3); i > 0; i-- {
				w.step()
			}
		}
		for _, k := range liveKeys(w, keys) {
			if annotated(w.nodes[w.name(k)], v2alpha1.AnnotationPauseRollout) {
				w.annotate(k, v2alpha1.AnnotationPauseRollout, "")
			}
			w.liftOtherSystemsGate(k)
		}
		w.run(1000)
		if t.Failed() {
			t.Fatal(fmt.Sprint("seed ", seed))
		}
	}
}
