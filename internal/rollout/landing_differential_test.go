package rollout

// A change applied node by node starts its nodes in the order the same
// change applied at once starts them (DESIGN §4: "a change applied node by
// node in any order, any gaps between applies … as if applied at once").
// This compares the two on seeded random changes, judging only by what
// started and by the tenant's lists (which nodes one needs before another):
// no rule of the planner's is read, so the check holds whatever the
// planner's reasons for its holds are. Each world also holds every release
// against the property test's oracle.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// landingCase is one change to a settled tenant whose nodes carry
// rollout-id r1.
type landingCase struct {
	size int
	// oldChart: the nodes carry the old chart's explicit lists; pinned:
	// every entry pinned to the version rendered for the node it names,
	// as the user's chart renders them (renders only).
	oldChart, pinned bool
	// down are taken down before the change.
	down []string
	// changed get a new version; with bringUp the change also drops their
	// up flag, bringing the down ones back.
	changed []string
	bringUp bool
	// takeDown are taken down by the change, emptied given empty lists
	// (renders only).
	takeDown, emptied []string
	// kubectl: written without a new rollout-id, so grouped by the settle
	// time alone (the gaps are shorter than it).
	kubectl bool
	// order is the order of the writes, gaps the ticks after each.
	order []string
	gaps  []int
	// crashed is crashed before the change, on its old target, and mended
	// only by its release for the new one; paused is paused through the
	// change and resumed after.
	crashed, paused string
	grouping        Grouping
}

func (c landingCase) String() string {
	return fmt.Sprintf("size %d (old chart's lists: %v, pinned: %v), down %v, changed %v (brought up: %v, by kubectl: %v), taken down %v, given empty lists %v, written %v with gaps %v, crashed %q, paused %q, %+v",
		c.size, c.oldChart, c.pinned, c.down, c.changed, c.bringUp, c.kubectl, c.takeDown, c.emptied, c.order, c.gaps, c.crashed, c.paused, c.grouping)
}

// randomLandingCase draws a change. A node crashing while the change lands
// is left out: "at once" says nothing of when, relative to the change, it
// crashes (the property test holds those against its oracle).
func randomLandingCase(rng *rand.Rand) landingCase {
	c := landingCase{size: 3 + rng.IntN(4), oldChart: rng.IntN(3) == 0}
	keys := keysOf(c.size)
	switch rng.IntN(8) {
	case 0: // the whole tenant down
		c.down = keys
	case 1, 2:
		c.down = []string{"be"}
	}
	for _, k := range keys[1:] {
		if rng.IntN(6) == 0 && !slices.Contains(c.down, k) {
			c.down = append(c.down, k)
		}
	}
	if c.changed = randomSubset(rng, keys); len(c.changed) == 0 {
		c.changed = []string{keys[rng.IntN(len(keys))]}
	}
	c.kubectl = rng.IntN(3) == 0
	c.bringUp = !c.kubectl && rng.IntN(3) == 0
	if !c.kubectl && rng.IntN(4) == 0 {
		c.takeDown = []string{keys[1+rng.IntN(len(keys)-1)]}
	}
	if !c.kubectl && rng.IntN(4) == 0 {
		c.emptied = []string{keys[rng.IntN(len(keys))]}
	}
	if c.kubectl || rng.IntN(2) == 0 {
		c.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
	}
	if !c.kubectl && rng.IntN(2) == 0 {
		c.grouping.LandingTimeout = 5 * time.Minute
	}
	for _, i := range rng.Perm(c.size) {
		k := keys[i]
		if c.kubectl && (!slices.Contains(c.changed, k) || slices.Contains(c.down, k)) {
			continue // an edit touches only what it changes
		}
		c.order = append(c.order, k)
	}
	for range c.order {
		if c.kubectl {
			c.gaps = append(c.gaps, rng.IntN(10)) // within the settle time
		} else {
			c.gaps = append(c.gaps, rng.IntN(12))
		}
	}
	switch rng.IntN(4) {
	case 1:
		if k := c.changed[rng.IntN(len(c.changed))]; !slices.Contains(c.down, k) {
			c.crashed = k // a node the change mends
		}
	case 2:
		c.paused = keys[rng.IntN(len(keys))]
	}
	c.pinned = c.oldChart && !c.kubectl && rng.IntN(2) == 0
	return c
}

// write applies the change to node k.
func (c landingCase) write(w *world, k string) {
	w.update(k, func(n v2alpha1.Node) {
		if slices.Contains(c.changed, k) {
			n.NodeSpec().ExpressVersion = v2
			if c.bringUp {
				n.NodeSpec().Up = nil
			}
		}
		if slices.Contains(c.takeDown, k) {
			n.NodeSpec().Up = ptr.To(false)
		}
		if slices.Contains(c.emptied, k) {
			explicitLists(w, nil, nil)(n.NodeSpec())
		}
		if c.pinned {
			pinEntries(n.NodeSpec(), func(named string) (string, string, bool) {
				if slices.Contains(c.changed, w.key(named)) {
					return v2, "", true
				}
				return v1, "", true
			})
		}
		if !c.kubectl {
			setAnnotation(n, v2alpha1.AnnotationRolloutID, "r2")
		}
	})
}

// play settles the tenant, applies the change — at once, or node by node
// with its gaps — and returns the changed nodes in the order their first
// rollout onto their final target started.
func (c landingCase) play(t *testing.T, atOnce bool) ([]string, *world) {
	w := newWorld(t, "t")
	if c.oldChart {
		if c.pinned {
			pinnedOldChart(w, c.size, v1)
		} else {
			oldChart(c.size)(w)
		}
		w.setRolloutID("r1", keysOf(c.size)...)
		w.run(400)
	} else {
		settledByRolloutID(c.size, "r1")(w)
	}
	w.grouping = c.grouping
	for _, k := range c.down {
		up(k, ptr.To(false))(w)
	}
	w.run(400)
	if c.crashed != "" {
		w.crashOnTarget(c.crashed) // a crash only the change mends
	}
	if c.paused != "" {
		w.annotate(c.paused, v2alpha1.AnnotationPauseRollout, "true")
	}
	w.logf("---- the change")
	mark := len(w.started)
	for i, k := range c.order {
		c.write(w, k)
		if !atOnce {
			ticks(c.gaps[i])(w)
		}
	}
	if c.paused != "" {
		ticks(30)(w)
		w.annotate(c.paused, v2alpha1.AnnotationPauseRollout, "")
	}
	w.run(600)
	var firsts []string
	for i, k := range w.started[mark:] {
		n := w.nodes[w.name(k)]
		if n != nil && slices.Contains(c.changed, k) && !slices.Contains(firsts, k) && w.startedTarget[mark+i] == StampedTarget(n) {
			firsts = append(firsts, k)
		}
	}
	return firsts, w
}

// outOfOrder returns the first pair of nodes that started in one order
// applied at once and in the other node by node, or that started in only
// one of them; of the pairs the change orders (one waits for the other's
// new state: waitsFor). Two nodes neither waits for may start in either
// order: which goes first then depends on when each was released.
func outOfOrder(w *world, c landingCase, atOnce, byNode []string) string {
	if !slices.Equal(slices.Sorted(slices.Values(atOnce)), slices.Sorted(slices.Values(byNode))) {
		return fmt.Sprintf("at once %v started, node by node %v", atOnce, byNode)
	}
	for i, a := range atOnce {
		for _, b := range atOnce[i+1:] {
			if (c.waitsFor(w, a, b) || c.waitsFor(w, b, a)) && slices.Index(byNode, b) < slices.Index(byNode, a) {
				return fmt.Sprintf("%s started before %s at once, after it node by node", a, b)
			}
		}
	}
	return ""
}

// waitsFor reports whether the change makes node key b wait for node key a,
// as the tenant's lists say once it has landed (world w): b's upgrade list
// names a and both change; or b's provisioning list names a, and a is not
// Ready when the change comes (down and brought back up, or crashed). A
// list is read through the nodes it names that are down.
func (c landingCase) waitsFor(w *world, b, a string) bool {
	notReady := slices.Contains(c.down, a) && slices.Contains(c.changed, a) && c.bringUp || a == c.crashed
	return slices.Contains(c.changed, a) && slices.Contains(c.changed, b) && listNames(w, b, a, "upgrade") ||
		notReady && listNames(w, b, a, "provisioning")
}

// listNames reports whether node key b's list names key a, directly or through
// the nodes it names that are down.
func listNames(w *world, b, a, list string) bool {
	o := newOracle(w, nil)
	seen := map[string]bool{}
	var walk func(m string) bool
	walk = func(m string) bool {
		if seen[m] {
			return false
		}
		seen[m] = true
		entries, order, builtin := o.listOf(m, list)
		var next []string
		if builtin {
			next = order[:slices.Index(order, m)]
		}
		for _, p := range entries {
			next = append(next, p.ExpressNode)
		}
		for _, y := range next {
			if _, ok := w.nodes[y]; ok && (y == w.name(a) || !o.live(y) && walk(y)) {
				return true
			}
		}
		return false
	}
	return walk(w.name(b))
}

func TestAChangeAppliedNodeByNodeStartsItsNodesInTheOrderItWouldAppliedAtOnce(t *testing.T) {
	cases := 1000
	if testing.Short() {
		cases = 300
	}
	ordered, pinned := 0, 0 // cases in which the change started two nodes or more; on pinned lists
	for seed := uint64(1); seed <= uint64(cases); seed++ {
		c := randomLandingCase(rand.New(rand.NewPCG(seed, 0xa7)))
		want, atOnce := c.play(t, true)
		got, byNode := c.play(t, false)
		if why := outOfOrder(atOnce, c, want, got); why != "" {
			t.Fatalf("seed %d: %s\n%s: node by node %q, at once %q\n--- node by node:\n%s\n--- at once:\n%s",
				seed, c, why, got, want, strings.Join(byNode.log, "\n"), strings.Join(atOnce.log, "\n"))
		}
		if len(want) > 1 {
			ordered++
			if c.pinned {
				pinned++
			}
		}
	}
	t.Logf("%d changes, %d of them starting two nodes or more (%d on pinned lists), in the same order node by node as at once", cases, ordered, pinned)
	if ordered < cases/4 {
		t.Fatalf("only %d of %d changes started two nodes or more: the comparison says little", ordered, cases)
	}
}
