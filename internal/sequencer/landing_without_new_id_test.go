package sequencer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On a tenant whose nodes carry rollout-id, a target change that comes
// without a new rollout-id (a kubectl edit, a chart whose templates changed
// while its values did not) is grouped by the settle time; a render, which
// changes the target and the id in one write, is released the moment the
// ids agree, however quickly a render of the id alone follows it.
func TestChangesWithoutANewRolloutIDAreGroupedByTheSettleTime(t *testing.T) {
	for _, c := range []struct {
		name string
		// change is applied to the settled tenant; firstWithin and
		// firstAfter bound the ticks from its first write to the first
		// rollout of the tenant, counted once change returns (a rollout
		// that starts while it applies counts as its end).
		change                  step
		want                    string
		firstAfter, firstWithin int
		settleTime              bool
	}{
		{name: "a render is released as soon as its ids agree",
			change: render("r2", false, 0, all5...), settleTime: true, want: "fe1 fe2 be fe3 fe4", firstAfter: 0, firstWithin: 2},
		{name: "a render followed 2 s later by a render of the id alone holds nothing more",
			change: func(w *world) {
				render("r2", false, 0, all5...)(w)
				w.now = w.now.Add(2 * time.Second) // no pass in between: the sequencer was busy
				renderIDOnly("r3", all5...)(w)
			},
			settleTime: true, want: "fe1 fe2 be fe3 fe4", firstAfter: 0, firstWithin: 2},
		{name: "a kubectl edit of every node, 2 s apart, is held the settle time after the last",
			change: oneByOne("changeset-2", 2, "be", "fe1", "fe2", "fe3", "fe4"), settleTime: true, want: "fe1 fe2 be fe3 fe4", firstAfter: 8 + 10, firstWithin: 8 + 12},
		{name: "without a settle time a kubectl edit is not grouped",
			change: oneByOne("changeset-2", 2, "be", "fe1", "fe2", "fe3", "fe4"), settleTime: false, want: "be fe1 fe2 fe3 fe4", firstAfter: 0, firstWithin: 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, "acme")
			if !c.settleTime {
				w.oracle = nil // ungrouped: each write is a change of its own, as the oracle cannot know
			}
			settledByRolloutID(5, "r1")(w)
			if c.settleTime {
				bySettleTime(w)
			}
			mark, from := len(w.started), w.tick
			c.change(w)
			first := -1
			for range 300 {
				if first < 0 && w.startedSince(mark) != "" {
					first = w.tick - from
				}
				w.step()
			}
			require.GreaterOrEqual(t, first, 0, "something rolled")
			assert.Equal(t, c.want, w.startedSince(mark), "rollout order")
			assert.GreaterOrEqual(t, first, c.firstAfter, "held at least this long")
			assert.LessOrEqual(t, first, c.firstWithin, "and no longer")
		})
	}
}

// renderIDOnly annotates the nodes with rollout-id id and changes nothing
// else: a render whose values changed in what these nodes do not use.
func renderIDOnly(id string, keys ...string) step {
	return func(w *world) { w.setRolloutID(id, keys...) }
}
