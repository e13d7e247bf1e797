package rollout

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A node released on the target it already runs Ready (a change reverted
// before its release) has nothing left to roll: its release records its
// own rollout converged (released-after). Otherwise it read as a rollout
// under way until a later pass saw it Ready, and a crash in between — be
// crashed, gated for the same change, waiting for fe2 in the upgrade
// order — let fe2's new pods go as a half-done rollout's, alongside be
// instead of after it (DESIGN §4: change to all while be is crashed: BE,
// FE1, FE2).
func TestANodeReleasedOnTheTargetItRunsReadyRecoversAfterItsPredecessors(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(200)
	fe2 := w.name("fe2")
	w.setVersion(v2, "be", "fe1", "fe2")
	w.setVersion(v1, "fe2") // reverted before its release: gated, on what it runs
	w.stepUntilReleased("fe2")
	require.True(t, w.snapshot().converged(fe2), "fe2 released on the target it runs Ready:\n%s", w.dump())
	require.True(t, Gated(w.nodes[w.name("be")]), "be waits for fe2 in the upgrade order")
	assert.True(t, w.snapshot().recordedConverged(fe2), "the release records fe2's own rollout converged")
	assert.NotContains(t, recordOf(w.nodes[fe2]).After, fe2, "its history names what it was released after, not itself")

	// Before the next pass: be crashes, fe2 loses its pods.
	w.crash("be")
	w.evict("fe2")
	assert.False(t, w.snapshot().inFlight(fe2), "fe2's release found it converged: a recovery, not a rollout under way")
	ok, why := PodsMayStart(w.snapshot(), fe2)
	assert.False(t, ok, "fe2's new pods wait for be, its provisioning predecessor")
	assert.Contains(t, why, "acme-be")
	ticks(3)(w)
	assert.True(t, slices.ContainsFunc(w.pods[fe2], Pod.HeldBySequencer), "fe2's new pods still wait for be:\n%s", w.dump())
}

// Released on what its pods run Ready, a node whose StatefulSet's template
// was made for another target (the operator began a rollout the revert
// overtook, and has not put the template back) still has a rollout to run:
// its release records nothing of its own.
func TestANodeWhoseTemplateWasMadeForAnotherTargetIsNotRecordedConvergedAsItIsReleased(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(200)
	fe2 := w.name("fe2")
	w.setVersion(v2, "be", "fe1", "fe2")
	w.setVersion(v1, "fe2")
	for i := 0; ; i++ {
		require.Less(t, i, 200, "fe2 never released:\n%s", w.dump())
		s := w.snapshot()
		d := decisionOf(t, Plan(s), fe2)
		if d.Gated {
			w.step()
			continue
		}
		assert.True(t, d.ReleasedConverged, "its pods and its template run the target it is released for")
		s.SetTemplates = map[string][]Template{fe2: {{Hash: "made-for-v2"}}}
		d = decisionOf(t, Plan(s), fe2)
		assert.False(t, d.ReleasedConverged, "its template was made for another target: a rollout to run (%s)", d.Condition.Message)
		return
	}
}
