package rollout

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// DESIGN §4: a change to all goes FE1, FE2, BE; only a crashed backend
// goes first. be's release for v2 was overtaken (another system's gate
// held its operator): its StatefulSet's template and pods still make v1,
// the target it was first released for and runs. With a change to all
// admitted, be's pods are lost and made again from that template: a
// recovery of what it runs, which the pod rule starts (be has no
// provisioning prerequisite) — not a pod held for be's release, which
// would leave be Ready only once released and let it go first, by the
// provisioning order, ahead of fe1 and fe2.
func TestAnOvertakenNodesPodsMadeAgainFromItsUnmovedTemplateAreARecoveryNotARollout(t *testing.T) {
	for name, loss := range beLosesPods {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "acme")
			settled(3)(w)
			w.toggleOtherSystemsGate("be")
			w.setVersion(v2, "be")
			w.stepUntilReleased("be")
			changeToAllAfterLoss(t, w, loss)
		})
	}
}

// The same recovery where be's upgrade list names fe3 and fe3's defaulted
// list waits for be: a loop of upgrade waits alone, which no order meets
// (docs/sequencer.md). be's pods made again from its unmoved template start
// by the pod rule; be is Ready, and stays held with fe3 as a
// DependencyCycle — the loop is not broken through a hold of the
// sequencer's own making.
func TestAnOvertakenNodesRecoveryDoesNotBreakALoopOfUpgradeWaits(t *testing.T) {
	for name, loss := range beLosesPods {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "acme")
			w.create("be", v1, func(s *v2alpha1.NodeSpec) {
				s.DeploymentDependencies = &v2alpha1.DeploymentDependencies{UpgradePrerequisites: []v2alpha1.Prerequisite{
					{ExpressNode: w.name("fe3"), Kind: v2alpha1.KindFrontend, PodConditionType: "Ready", ConditionStatus: "True"},
				}}
			})
			for _, k := range []string{"fe1", "fe2", "fe3"} {
				w.create(k, v1, nil)
			}
			w.run(50)
			w.toggleOtherSystemsGate("be")
			w.setConfig("c1", "be")
			w.stepUntilReleased("be")
			w.setVersion(v2, "be", "fe3")
			w.liftOtherSystemsGate("be")
			w.step()
			require.Equal(t, v2alpha1.ReasonDependencyCycle, w.condition("be").Reason, w.condition("be").Message)
			target := StampedTarget(w.nodes[w.name("be")])
			mark := len(w.started)
			loss(w)
			for range 20 {
				w.step()
			}
			assert.Empty(t, rolloutsTo(w, mark, target), "nothing of the loop rolls:\n%s", strings.Join(w.log, "\n"))
			assert.Equal(t, v2alpha1.ReasonDependencyCycle, w.condition("be").Reason, w.condition("be").Message)
			assert.True(t, w.snapshot().isReady(w.name("be")), "be's pods made again on what it runs start")
		})
	}
}

// changeToAllAfterLoss applies a change to all to w's 3 nodes, lifts the
// other system's gate on be, has be's pods made again (loss), and asserts
// the change rolls in its order, FE1, FE2, BE.
func changeToAllAfterLoss(t *testing.T, w *world, loss func(*world)) {
	t.Helper()
	w.setVersion("express-e689.160", keysOf(3)...)
	w.liftOtherSystemsGate("be")
	target := StampedTarget(w.nodes[w.name("be")])
	mark := len(w.started)
	loss(w)
	w.run(300)
	assert.Equal(t, "fe1 fe2 be", rolloutsTo(w, mark, target), "the change to all's order:\n%s", strings.Join(w.log, "\n"))
}

// beLosesPods are the ways be's pods are made again from its template,
// its StatefulSet's spec untouched. (Scaled up, its spec changes: its
// pods wait for its release, as those of a template moved away and back
// do — templateUnmovedSinceRelease cannot tell the two apart.)
var beLosesPods = map[string]func(*world){
	"lost":    func(w *world) { w.lose("be") },
	"evicted": func(w *world) { w.evict("be") },
}

// rolloutsTo lists the nodes whose pods started on target since mark, in
// the order they started (a node's recovery on what it ran is not one).
func rolloutsTo(w *world, mark int, target string) string {
	var out []string
	for i, k := range w.started[mark:] {
		if w.startedTarget[mark+i] == target {
			out = append(out, k)
		}
	}
	return strings.Join(out, " ")
}
