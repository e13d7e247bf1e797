package rollout

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// The pods of a template moved away and back after a release was carried
// out wait for the node's release, however little of that release is left
// to show: the world fails the test where a node's pods start on a target
// it is not released for (world.start). DESIGN §4 (a change to all goes
// FE1, FE2, BE; a node moves only once released) and §9 (switching to
// enforce mid-rollout releases nothing out of order).

// movedBackTenant: a change to all to v2 whose release of be its operator
// carries out (be's template and pod on v2).
func movedBackTenant(t *testing.T) (*world, string) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(100)
	be := w.name("be")
	w.setVersion(v2, keysOf(3)...)
	v2hash := StampedTarget(w.nodes[be])
	for i := 0; i < 100 && w.lastHash[be] != v2hash; i++ {
		w.step()
	}
	require.Equal(t, v2hash, w.lastHash[be], "be's operator rolls v2")
	return w, be
}

// setGates adds (or, with on false, removes) the sequencer's gate on the
// nodes directly, as the switch to enforce (or to audit) does.
func setGates(w *world, on bool, keys ...string) {
	for _, k := range keys {
		n := w.nodes[w.name(k)]
		if on {
			n.NodeSpec().AddGate(v2alpha1.GateSequencer)
		} else {
			n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
		}
		n.SetGeneration(n.GetGeneration() + 1)
	}
}

// be's v2 pod started, not Ready, when the namespace goes to audit and the
// chart reverts the tenant to v1 (admitted ungated). Switched back to
// enforce, the operator moves be's template to v1 before the sequencer
// gates be: its one pod is replaced by a v1 pod, created held (be's
// current target). The chart then applies v3: the v1 pod, of a target in
// be's history its template was moved back to, with no v2 pod left and
// v2's rollout never converged, still waits. be, with no pod that may
// start, cannot become Ready without its release: it goes first, by the
// provisioning order, as a crashed backend does — to v3, never back to v1.
func TestAPodOfATemplateMovedBackAfterAReleaseCarriedOutPartWayWaitsAcrossTheSwitch(t *testing.T) {
	w, be := movedBackTenant(t)
	w.setVersion(v1, keysOf(3)...)
	setGates(w, false, keysOf(3)...)
	w.createPods(be, StampedTarget(w.nodes[be]))
	setGates(w, true, keysOf(3)...)
	require.True(t, w.pods[be][0].HeldBySequencer(), "be's v1 pod is created held")
	w.setVersion("express-e689.160", keysOf(3)...)
	target := StampedTarget(w.nodes[be])
	mark := len(w.started)
	w.run(200)
	assert.Equal(t, "be fe1 fe2", rolloutsTo(w, mark, target), "be goes first, as a crashed backend:\n%s", strings.Join(w.log, "\n"))
}

// be Ready on v2, no pass of the sequencer in between to record it; the
// revert to v1 is gated, and an operator that rolls a gated node moves be
// back to v1 (its pod created held). Then v3: be goes first, as above.
func TestAPodOfATemplateMovedBackAfterAReleaseConvergedUnrecordedWaits(t *testing.T) {
	w, be := movedBackTenant(t)
	for i := 0; i < 10 && !w.snapshot().isReady(be); i++ {
		w.operate()
	}
	require.True(t, w.snapshot().isReady(be))
	w.setVersion(v1, keysOf(3)...)
	v1hash := StampedTarget(w.nodes[be])
	w.createPods(be, v1hash)
	require.True(t, w.pods[be][0].HeldBySequencer())
	w.setVersion("express-e689.160", keysOf(3)...)
	require.True(t, w.snapshot().AwaitsRelease(be, v1hash), "the v1 pod waits for be's release")
	target := StampedTarget(w.nodes[be])
	mark := len(w.started)
	w.run(200)
	assert.Equal(t, "be fe1 fe2", rolloutsTo(w, mark, target), "be goes first, as a crashed backend:\n%s", strings.Join(w.log, "\n"))
}

// be's operator is held by another system's gate while six changes to all
// roll through: each is released to be and overtaken by the next, so be
// still runs, and its template makes, v1 — which falls out of be's
// rollout-history (RolloutHistoryLength). Its pods, lost or evicted and
// made again from that unmoved template, are a recovery all the same: the
// StatefulSet's spec is as be's latest release read it.
func TestAnOvertakenNodesRecoveryNeedsNoRecordOfWhatItRunsInItsHistory(t *testing.T) {
	for name, loss := range beLosesPods {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "acme")
			settled(3)(w)
			be := w.name("be")
			runs := w.pods[be][0].Hash
			w.toggleOtherSystemsGate("be")
			for i := range 6 {
				w.setVersion(fmt.Sprintf("express-e689.%d", 200+i), keysOf(3)...)
				w.stepUntilReleased("be")
			}
			require.False(t, strings.Contains(w.nodes[be].GetAnnotations()[v2alpha1.AnnotationRolloutHistory], runs), "what be runs is out of its history")
			changeToAllAfterLoss(t, w, loss)
		})
	}
}
