package rollout

// A recovering node's condition is the record that its rollout converged
// (no StatefulSet keeps one for a first rollout). Every reason the planner
// writes for a recovery must keep reading as one: a reason that did not
// would make the next pass take the node for a rollout still under way,
// and the exception for a half-done rollout would let its new pods go
// before its predecessors are Ready.

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

func TestARecoveryHeldForAPausedPredecessorStaysARecovery(t *testing.T) {
	w := newWorld(t, "acme")
	settledTenant(w, 2) // fe1's first rollout: nothing but its condition records it
	w.annotate("be", v2alpha1.AnnotationPauseRollout, "true")
	w.setVersion(v2, "be") // gated, paused; its upgrade waits for fe1 on target
	ticks(12)(w)
	mark := len(w.started)
	w.crashOnTarget("be")
	w.evict("fe1")
	ticks(20)(w) // the world's oracle fails the test if fe1's new pods may schedule
	assert.True(t, slices.ContainsFunc(w.pods[w.name("fe1")], Pod.HeldBySequencer), "fe1's new pods wait for be")
	assert.Equal(t, v2alpha1.ReasonRolloutPaused, w.condition("fe1").Reason)
	assert.Contains(t, w.condition("fe1").Message, "recovering: new pods held scheduling-gated; waiting for acme-be (Backend) which is paused")
	w.annotate("be", v2alpha1.AnnotationPauseRollout, "")
	w.run(100)
	assert.Equal(t, "be fe1", w.startedSince(mark), "be first, then fe1's recovery")
}
