package rollout

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"k8s.io/apimachinery/pkg/api/equality"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A frozen sequencer: a replica that planned, was stopped (SIGSTOP, a
// stalled node, a long GC pause) before its writes went out, and wakes up
// later — after its lease passed to another replica that went on
// sequencing — to send them. Its writes meet the API server's guards as the
// reconciler's do: the gate patch tests the generation and gates it planned
// on, a release must stand the validating webhooks' check (ReleaseStands)
// on the state of the moment it is written, and the condition is written
// only on the node as it was read (its resourceVersion: see the
// reconciler's applyCondition).

// frozenPlan is a plan made at one tick and written at a later one.
type frozenPlan struct {
	decisions []Decision
	// gated and generation are each node as the plan saw it; seen the node
	// itself.
	gated      map[string]bool
	generation map[string]int64
	seen       map[string]v2alpha1.Node
	// found are the nodes the plan found Ready on their released target
	// (seeConvergence): where its writes land, the oracle knows a pass
	// found them so.
	found map[string]string
}

// freeze plans now and keeps the plan for later.
func (w *world) freeze() frozenPlan {
	w.seeConvergence()
	f := frozenPlan{decisions: Plan(w.snapshot()), gated: map[string]bool{}, generation: map[string]int64{}, seen: map[string]v2alpha1.Node{}, found: w.seenThisPass}
	w.seenThisPass = nil
	for name, n := range w.nodes {
		f.gated[name], f.generation[name] = Gated(n), n.GetGeneration()
		f.seen[name] = n.DeepCopyObject().(v2alpha1.Node)
	}
	return f
}

// wake sends a frozen plan's writes, decision by decision, in the
// reconciler's order — the gate, the pods' gates, the condition — each
// through the API server's guards; a write refused ends its decision, as
// an error ends the reconciler's apply. The oracle checks every release
// that gets through. It returns the releases the release guard refused.
func (w *world) wake(f frozenPlan) (refused int) {
	w.seenThisPass = f.found
	defer func() { w.seenThisPass = nil }()
	for _, d := range f.decisions {
		n := w.nodes[d.Node]
		if n == nil || !d.Changed(f.seen[d.Node]) {
			continue // as the reconciler does: nothing to write on what it saw
		}
		gen := f.generation[d.Node]
		if f.gated[d.Node] != d.Gated {
			if n.GetGeneration() != gen { // the gate patch's test of the generation
				continue
			}
			if !d.Gated {
				if ok, _ := ReleaseStands(w.snapshot(), d.Node, ""); !ok {
					refused++
					continue
				}
			}
			gateOnly := d
			gateOnly.PodsToRelease, gateOnly.KeepCondition = nil, true
			// Checked against the drops of the plan the guard rests on
			// now, not the frozen plan's one decision.
			w.applyCertified([]Decision{gateOnly}, Plan(w.snapshot()))
			gen = n.GetGeneration()
			f.seen[d.Node] = n.DeepCopyObject().(v2alpha1.Node) // the patch's answer
		}
		held := false
		for _, pod := range d.PodsToRelease {
			if !slices.ContainsFunc(w.pods[d.Node], func(p Pod) bool { return p.Name == pod && p.HeldBySequencer() }) {
				continue // gone, or released meanwhile: the patch's test of the gates fails
			}
			if ok, _ := ReleaseStands(w.snapshot(), d.Node, pod); !ok {
				refused++
				held = true
				continue
			}
			podOnly := Decision{Node: d.Node, Gated: Gated(n), PodsToRelease: []string{pod}, KeepCondition: true}
			w.applyCertified([]Decision{podOnly}, Plan(w.snapshot()))
		}
		if held || d.KeepCondition {
			continue
		}
		if !equality.Semantic.DeepEqual(f.seen[d.Node], n) {
			continue // the resourceVersion it read is gone: 409 Conflict
		}
		c := d.Condition
		c.ObservedGeneration = gen // the generation the frozen replica saw
		SetCondition(&n.NodeStatus().Conditions, c, w.now)
		w.recordSeen(d.Node)
	}
	return refused
}

// fe1's first rollout converges (no StatefulSet record: one was created
// for it) while a replica that planned its progress deadline is frozen.
// Woken, that replica's condition write must not replace the
// RolloutComplete record: fe1 would read as a rollout still under way, and
// once its pods are lost, the exception for a half-done rollout would let
// them start while be — crashed, paused and gated for a change that waits
// for fe1 — is not Ready.
func TestAFrozenReplicasLateConditionDoesNotEraseTheRecordThatARolloutConverged(t *testing.T) {
	w := newWorld(t, "acme")
	w.deadline = 3 * time.Second
	w.rollTicks = 8
	w.create("be", v1, nil)
	w.run(100)
	w.create("fe1", v1, nil)
	ticks(3)(w) // fe1 released, not Ready yet
	w.now = w.now.Add(2 * time.Second)
	frozen := w.freeze() // plans fe1's progress deadline
	require.Equal(t, v2alpha1.ReasonProgressDeadlineExceeded, frozenDecision(frozen, w.name("fe1")).Condition.Reason)
	w.run(100)
	require.Equal(t, v2alpha1.ReasonRolloutComplete, w.condition("fe1").Reason)

	w.wake(frozen)
	assert.Equal(t, v2alpha1.ReasonRolloutComplete, w.condition("fe1").Reason, "the late write is refused: the node changed since it was read")

	w.annotate("be", v2alpha1.AnnotationPauseRollout, "true")
	w.setVersion(v2, "be")
	w.crashOnTarget("be")
	w.evict("fe1") // the world's oracle fails the test if fe1's new pods may schedule
	ticks(10)(w)
	assert.True(t, slices.ContainsFunc(w.pods[w.name("fe1")], Pod.HeldBySequencer), "fe1's new pods wait for be")
	assert.Equal(t, v2alpha1.ReasonRolloutPaused, w.condition("fe1").Reason)
	assert.Contains(t, w.condition("fe1").Message, "recovering: new pods held scheduling-gated")
}

// frozenDecision is the frozen plan's decision for the node.
func frozenDecision(f frozenPlan, name string) Decision {
	for _, d := range f.decisions {
		if d.Node == name {
			return d
		}
	}
	return Decision{}
}

// freezeAtConvergence provisions be, then fe1, steps until fe1 is Ready on
// its target and no pass has recorded it yet, and freezes a replica there
// (its plan writes fe1's RolloutComplete); the live one goes on until the
// tenant settles.
func freezeAtConvergence(t *testing.T, w *world) frozenPlan {
	t.Helper()
	w.rollTicks = 3
	w.create("be", v1, nil)
	w.run(100)
	w.create("fe1", v1, nil)
	fe1 := w.name("fe1")
	for range 50 {
		w.step()
		if w.snapshot().converged(fe1) && w.condition("fe1").Reason != v2alpha1.ReasonRolloutComplete {
			f := w.freeze()
			require.Equal(t, v2alpha1.ReasonRolloutComplete, frozenDecision(f, fe1).Condition.Reason)
			w.run(100)
			return f
		}
	}
	t.Fatal("fe1 never converged unrecorded")
	return frozenPlan{}
}

// A late RolloutComplete, planned for fe1's first release, must not
// replace the record of a newer one: a change reverted before its release
// releases fe1 again on the template it runs (no StatefulSet record), and
// its recovery behind a paused, crashed be must stay a recovery.
func TestAFrozenReplicasLateRolloutCompleteDoesNotReplaceANewerReleasesRecord(t *testing.T) {
	w := newWorld(t, "acme")
	frozen := freezeAtConvergence(t, w)
	w.setVersion(v2, "fe1")
	w.setVersion(v1, "fe1") // reverted before its release: released again on what it runs
	w.run(100)
	fe1 := w.name("fe1")
	require.Greater(t, releasedGeneration(w.nodes[fe1]), frozen.generation[fe1], "a newer release")

	w.annotate("be", v2alpha1.AnnotationPauseRollout, "true")
	w.setVersion(v2, "be") // gated, paused; its upgrade waits for fe1 on target
	ticks(3)(w)
	w.crashOnTarget("be")
	w.evict("fe1")
	ticks(3)(w)
	require.Equal(t, v2alpha1.ReasonRolloutPaused, w.condition("fe1").Reason, "a recovery's record")

	w.wake(frozen)
	assert.Equal(t, v2alpha1.ReasonRolloutPaused, w.condition("fe1").Reason, "the late write is refused")
	ticks(10)(w) // the world's oracle fails the test if fe1's new pods may schedule
	assert.True(t, slices.ContainsFunc(w.pods[fe1], Pod.HeldBySequencer), "fe1's new pods still wait for be")
}

// A late RolloutComplete must not land on a node deleted and created again
// under the same name (its generations start again): the new node's first
// rollout, still under way, would read as converged.
func TestAFrozenReplicasLateRolloutCompleteDoesNotLandOnANodeCreatedAgain(t *testing.T) {
	w := newWorld(t, "acme")
	frozen := freezeAtConvergence(t, w)
	w.remove("fe1")
	w.run(100)
	fe1 := w.name("fe1")
	require.Nil(t, w.nodes[fe1])
	w.create("fe1", v1, nil)
	w.stuck[fe1] = true // its first rollout never becomes Ready
	ticks(3)(w)
	require.True(t, w.snapshot().inFlight(fe1), "released, rolling")
	w.wake(frozen)
	assert.NotEqual(t, v2alpha1.ReasonRolloutComplete, w.condition("fe1").Reason, "the late write is refused")
	assert.True(t, w.snapshot().inFlight(fe1), "a first rollout no pass found converged is still under way")
}
