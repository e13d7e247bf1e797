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
	w, fe2 := revertedBeforeItsRelease(t)
	w.stepUntilReleased("fe2")
	require.True(t, w.snapshot().converged(fe2), "fe2 released on the target it runs Ready:\n%s", w.dump())
	require.True(t, Gated(w.nodes[w.name("be")]), "be waits for fe2 in the upgrade order")
	assert.True(t, w.snapshot().recordedConverged(fe2), "the release records fe2's own rollout converged")
	assert.NotContains(t, recordOf(w.nodes[fe2]).After, fe2, "its history names what it was released after, not itself")

	recoversAfterBe(t, w, fe2)
}

// Released on what its pods run Ready, a node whose StatefulSet's template
// was made for another target (the operator began a rollout the revert
// overtook, and has not put the template back) still has a rollout to run:
// its release records nothing of its own.
func TestANodeWhoseTemplateWasMadeForAnotherTargetIsNotRecordedConvergedAsItIsReleased(t *testing.T) {
	w, fe2 := revertedBeforeItsRelease(t)
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

// The same, with fe2 not Ready as it is released — a readiness blip, its
// pods lost, a crash at that moment: its own health never holds it, and
// its target is the one released before, its workload made for it. A
// recovery (DESIGN §4), Ready or not: its new pods wait for be.
func TestANodeReleasedAgainOnItsReleasedTargetRecoversAfterItsPredecessorsReadyOrNot(t *testing.T) {
	for _, c := range []struct {
		name  string
		upset func(w *world)
	}{
		{"a readiness blip as it is released", func(w *world) { w.blip("fe2") }},
		{"a crash as it is released", func(w *world) { w.crash("fe2") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			w, fe2 := revertedBeforeItsRelease(t)
			for i := 0; decisionOf(t, Plan(w.snapshot()), fe2).Gated; i++ {
				require.Less(t, i, 200, "fe2 never released:\n%s", w.dump())
				w.step()
			}
			c.upset(w)
			d := decisionOf(t, Plan(w.snapshot()), fe2)
			require.False(t, d.Gated, "its own health does not hold it")
			assert.True(t, d.ReleasedConverged, "nothing to roll: %s", d.Condition.Message)
			w.sequence()
			require.True(t, Gated(w.nodes[w.name("be")]), "be waits for fe2 in the upgrade order")
			recoversAfterBe(t, w, fe2)
		})
	}
}

// revertedBeforeItsRelease is a settled three-node tenant changed whole to
// v2, with fe2 reverted to v1 before its release: gated, on what it runs.
// It returns the world and fe2's name.
func revertedBeforeItsRelease(t *testing.T) (*world, string) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(200)
	w.setVersion(v2, "be", "fe1", "fe2")
	w.setVersion(v1, "fe2")
	return w, w.name("fe2")
}

// recoversAfterBe crashes be and has fe2 lose its pods before the next
// pass, and checks that fe2, released, is a recovery whose new pods wait
// for be, its provisioning predecessor, through three steps of the world.
func recoversAfterBe(t *testing.T, w *world, fe2 string) {
	t.Helper()
	w.crash("be")
	w.evict("fe2")
	assert.False(t, w.snapshot().inFlight(fe2), "a recovery, not a rollout under way")
	ok, why := PodsMayStart(w.snapshot(), fe2)
	assert.False(t, ok, "fe2's new pods wait for be")
	assert.Contains(t, why, "acme-be")
	ticks(3)(w)
	assert.True(t, slices.ContainsFunc(w.pods[fe2], Pod.HeldBySequencer), "fe2's new pods still wait for be:\n%s", w.dump())
}
