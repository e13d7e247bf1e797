package rollout

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
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
			untilReleasing(t, w, fe2, w.step)
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

// A node whose rollout a change overtook before it converged — gated again
// mid-rollout, then changed back to the target it was released for — has
// its rollout still to finish when released again, Ready or not: nothing
// records that rollout converged. Were it taken for a recovery, be,
// crashed and gated for the same change, would go before fe2's rollout is
// done, against DESIGN §4 (be crashes while fe2 is rolling: BE only after
// FE2 is Ready). The world's oracle checks every release against that.
func TestANodeReleasedAgainOnATargetWhoseRolloutNeverConvergedGoesOnAsARolloutUnderWay(t *testing.T) {
	const v3 = "express-e689.160"
	w, fe2 := rollingToV2(t)
	require.False(t, w.snapshot().isReady(fe2), "fe2 is rolling")

	w.setVersion(v3, "be", "fe1", "fe2")
	w.setVersion(v2, "fe2") // back to the target it was released for
	require.True(t, Gated(w.nodes[fe2]))
	d := untilReleasing(t, w, fe2, w.step)
	assert.False(t, d.ReleasedConverged, "its rollout never converged: %s", d.Condition.Message)
	w.sequence()
	require.False(t, Gated(w.nodes[fe2]))
	assert.True(t, w.snapshot().inFlight(fe2), "a rollout under way, not a recovery")

	w.crash("be")
	w.evict("fe2")
	ok, why := PodsMayStart(w.snapshot(), fe2)
	assert.True(t, ok, "fe2's rollout goes on: %s", why)
	delete(w.stuck, fe2)
	w.run(200) // the oracle fails the test if be goes before fe2 is Ready
	assert.False(t, Gated(w.nodes[w.name("be")]))
}

// The same rollout, converging while the change holds fe2 gated: a pass
// finds it Ready on the target it was released for and records that
// release converged. Changed back and crashed before its release, fe2 is
// then a recovery: its new pods wait for be, as DESIGN §4 orders a change
// to all while be is crashed (BE, FE1, FE2).
func TestARolloutThatConvergedWhileGatedAgainIsRecordedAndRecoversAfterItsPredecessors(t *testing.T) {
	const v3 = "express-e689.160"
	w, fe2 := rollingToV2(t)
	w.setVersion(v3, "be", "fe1", "fe2")
	w.annotate("fe2", v2alpha1.AnnotationPauseRollout, "true") // held gated while it converges
	delete(w.stuck, fe2)
	for i := 0; !w.snapshot().recordedConverged(fe2); i++ {
		require.Less(t, i, 200, "fe2's v2 release never recorded converged:\n%s", w.dump())
		require.True(t, Gated(w.nodes[fe2]))
		w.step()
	}

	w.setVersion(v2, "fe2")
	w.annotate("fe2", v2alpha1.AnnotationPauseRollout, "false")
	w.crash("fe2")
	d := decisionOf(t, Plan(w.snapshot()), fe2)
	require.False(t, d.Gated, "released again on the target it runs: %s", d.Condition.Message)
	assert.True(t, d.ReleasedConverged, "its rollout converged while gated: nothing to roll")
	w.sequence()
	recoversAfterBe(t, w, fe2)
}

// A node that crashed after its rollout converged, and was gated for a
// change before it recovered, keeps in its rollout-history that the rollout
// it was recovering had converged (its condition was a recovery's). Changed
// back before its release, it is released a recovery, not Ready: its new
// pods wait for be.
func TestANodeCrashedBeforeAChangeRevertedBeforeItsReleaseIsStillARecovery(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(200)
	fe2 := w.name("fe2")
	w.crash("fe2")
	w.sequence() // the pass that finds it crashed writes a recovery's condition
	w.setVersion(v2, "be", "fe1", "fe2")
	w.setVersion(v1, "fe2")
	history := HistoryIn(w.nodes[fe2])
	require.NotEmpty(t, history)
	require.True(t, ptr.Deref(history[len(history)-1].Converged, false), "kept converged: %+v", history)
	d := untilReleasing(t, w, fe2, w.step)
	assert.True(t, d.ReleasedConverged, "nothing to roll: %s", d.Condition.Message)
	w.sequence()
	require.True(t, Gated(w.nodes[w.name("be")]), "be waits for fe2 in the upgrade order")
	recoversAfterBe(t, w, fe2)
}

// rollingToV2 is a settled three-node tenant changed whole to v2, stepped
// until fe2, released, rolls to v2 and does not become Ready (it is stuck
// until the test lets it go). It returns the world and fe2's name.
func rollingToV2(t *testing.T) (*world, string) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(200)
	fe2 := w.name("fe2")
	w.stuck[fe2] = true
	w.setVersion(v2, "be", "fe1", "fe2")
	w.stepUntilReleased("fe2")
	for i := 0; len(w.pods[fe2]) == 0 || w.pods[fe2][0].Hash != StampedTarget(w.nodes[fe2]); i++ {
		require.Less(t, i, 200, "fe2 never rolled:\n%s", w.dump())
		w.step()
	}
	return w, fe2
}

// A node brought back up on the target it had is a recovery (DESIGN §4),
// whatever its rollout-history says of the rollout it had: every pod of it
// is made again. Released so before its operator makes them, its pods wait
// for be when be crashes and is changed alone (its upgrade waiting for
// fe2): BE, then FE2.
func TestANodeBroughtBackUpOnTheTargetItHadIsARecovery(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(200)
	fe2 := w.name("fe2")
	w.update("fe2", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
	ticks(3)(w)
	w.update("fe2", func(n v2alpha1.Node) { n.NodeSpec().Up = nil })
	require.True(t, Gated(w.nodes[fe2]))
	for i := 0; Gated(w.nodes[fe2]); i++ {
		require.Less(t, i, 20, "fe2 never released:\n%s", w.dump())
		d := decisionOf(t, Plan(w.snapshot()), fe2)
		if !d.Gated {
			assert.True(t, d.ReleasedConverged, "brought back up on the target it had: a recovery (%s)", d.Condition.Message)
		}
		w.sequence() // the operator does not act yet
	}
	w.crash("be")
	w.setVersion(v2, "be")
	w.run(200) // the oracle fails the test if fe2's pods start before be is Ready
}

// The same rollout, converging under the gate of a change with no pass of
// the sequencer to see it, then crashed and changed back: its StatefulSet
// records the convergence (its currentRevision moved on since the release),
// and fe2 is a recovery — its new pods wait for be (DESIGN §4: change to
// all while be is crashed: BE, FE1, FE2).
func TestARolloutThatConvergedUnseenUnderTheGateOfAChangeIsKnownByItsStatefulSet(t *testing.T) {
	w, fe2 := rollingToV2(t)
	w.setVersion("express-e689.160", "fe2")
	delete(w.stuck, fe2)
	for i := 0; !w.snapshot().isReady(fe2); i++ {
		require.Less(t, i, 20, "fe2 never Ready on v2:\n%s", w.dump())
		w.operate() // no pass of the sequencer
	}
	w.crash("fe2")
	w.setVersion(v2, "fe2")
	require.True(t, w.snapshot().SetsConverged[fe2], "its StatefulSet records the v2 rollout converged")
	d := decisionOf(t, Plan(w.snapshot()), fe2)
	require.False(t, d.Gated, "released again on the target it was released for: %s", d.Condition.Message)
	assert.True(t, d.ReleasedConverged, "nothing to roll: %s", d.Condition.Message)
	w.sequence()
	recoversAfterBe(t, w, fe2)
}

// A node whose operator never took it down — up: false and back before it
// looked — still runs the rollout it ran: brought back up mid-rollout, it
// goes on as a rollout under way, and be, crashed and waiting for it in
// the upgrade order, goes only after it is Ready (DESIGN §4).
func TestANodeToggledDownAndUpBeforeItsOperatorLookedGoesOnAsARolloutUnderWay(t *testing.T) {
	w, fe2 := rollingToV2(t)
	w.update("fe2", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
	w.update("fe2", func(n v2alpha1.Node) { n.NodeSpec().Up = nil })
	d := decisionOf(t, Plan(w.snapshot()), fe2)
	require.False(t, d.Gated, "%s", d.Condition.Message)
	assert.False(t, d.ReleasedConverged, "its rollout runs on: %s", d.Condition.Message)
	w.sequence()
	w.crash("be")
	w.evict("fe2")
	delete(w.stuck, fe2)
	w.run(200) // the oracle fails the test if be goes before fe2 is Ready
}

// A gated node Ready on the target of its latest release whose
// StatefulSet's template was made for another target has a rollout of it
// under way: nothing is recorded converged (RecordConverged).
func TestAGatedNodeWhoseStatefulSetMakesPodsForAnotherTargetIsNotRecordedConverged(t *testing.T) {
	s, _, fe2 := recordingConverged(t)
	s.SetTemplates = map[string][]Template{fe2: {{Hash: "made-for-another"}}}
	assert.False(t, decisionOf(t, Plan(s), fe2).RecordConverged)
}

// recordingConverged is fe2 of rollingToV2 changed alone and held paused
// as its v2 rollout converges under the gate, the operator stepped until a
// plan records that rollout converged (RecordConverged). It returns that
// snapshot, its plan and fe2's name.
func recordingConverged(t *testing.T) (*Snapshot, []Decision, string) {
	w, fe2 := rollingToV2(t)
	w.setVersion("express-e689.160", "fe2")
	w.annotate("fe2", v2alpha1.AnnotationPauseRollout, "true")
	delete(w.stuck, fe2)
	for range 50 {
		w.operate()
		s := w.snapshot()
		decisions := Plan(s)
		if decisionOf(t, decisions, fe2).RecordConverged {
			return s, decisions, fe2
		}
	}
	t.Fatalf("no plan records fe2 converged:\n%s", w.dump())
	return nil, nil, ""
}

// fe2, its rollout overtaken mid-way and changed back (gated on the
// target it was released for), taken down and brought back up with no
// pass of the sequencer in between: its operator stopped it, and every pod
// of it is made anew. Released, it is a recovery (DESIGN §4, coming back
// up with the same target): its new pods wait for be, crashed as it is
// released.
func TestARolloutOvertakenThenTakenDownAndBroughtBackUpIsARecovery(t *testing.T) {
	w := exploration{name: "fe2 overtaken mid-way", size: 3, overtakenMidRollout: "fe2"}.setup(t)
	fe2 := w.name("fe2")
	w.update("fe2", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
	w.operate()
	require.Empty(t, w.pods[fe2], "its operator stopped it")
	w.update("fe2", func(n v2alpha1.Node) { n.NodeSpec().Up = nil })
	d := untilReleasing(t, w, fe2, func() { w.sequence(); w.operate() })
	assert.True(t, d.ReleasedConverged, "every pod of it made anew: a recovery (%s)", d.Condition.Message)
	w.sequence()
	w.crash("be")
	clear(w.stuck) // its pods made anew become Ready
	w.run(200)     // the oracle fails the test if fe2's pods start before be is Ready
}

// untilReleasing calls step until a plan of w releases node name, at most
// 200 times, and returns that plan's decision for it (not applied).
func untilReleasing(t *testing.T, w *world, name string, step func()) Decision {
	t.Helper()
	for range 200 {
		if d := decisionOf(t, Plan(w.snapshot()), name); !d.Gated {
			return d
		}
		step()
	}
	t.Fatalf("%s never released:\n%s", name, w.dump())
	return Decision{}
}
