package rollout

import (
	"slices"
)

// A frozen sequencer: a replica that planned, was stopped (SIGSTOP, a
// stalled node, a long GC pause) before its writes went out, and wakes up
// later — after its lease passed to another replica that went on
// sequencing — to send them. Its writes meet the API server's guards as the
// reconciler's do: the gate patch tests the generation and gates it planned
// on, and a release must stand the validating webhooks' check
// (ReleaseStands) on the state of the moment it is written.

// frozenPlan is a plan made at one tick and written at a later one.
type frozenPlan struct {
	decisions []Decision
	// gated and generation are each node as the plan saw it.
	gated      map[string]bool
	generation map[string]int64
}

// freeze plans now and keeps the plan for later.
func (w *world) freeze() frozenPlan {
	f := frozenPlan{decisions: Plan(w.snapshot()), gated: map[string]bool{}, generation: map[string]int64{}}
	for name, n := range w.nodes {
		f.gated[name], f.generation[name] = Gated(n), n.GetGeneration()
	}
	return f
}

// wake sends a frozen plan's writes, decision by decision, in the
// reconciler's order — the gate, the pods' gates, the condition — each
// through the API server's guards; a write refused ends its decision, as
// an error ends the reconciler's apply. The oracle checks every release
// that gets through. It returns the releases the release guard refused.
func (w *world) wake(f frozenPlan) (refused int) {
	for _, d := range f.decisions {
		n := w.nodes[d.Node]
		if n == nil {
			continue
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
			w.apply([]Decision{gateOnly})
			gen = n.GetGeneration()
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
			w.apply([]Decision{podOnly})
		}
		if held || d.KeepCondition {
			continue
		}
		c := d.Condition
		c.ObservedGeneration = gen // the generation the frozen replica saw
		SetCondition(&n.NodeStatus().Conditions, c, w.now)
	}
	return refused
}
