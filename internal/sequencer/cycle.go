package sequencer

import (
	"fmt"
	"slices"
	"strings"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// Cycle is a loop of prerequisites of one list that starts and ends at one
// node: none of its nodes could ever be released.
type Cycle struct {
	// List is the prerequisite list the loop runs through.
	List defaults.List
	// Index is the entry of the first node's explicit list that starts the
	// loop, -1 when the loop leaves it through its defaulted list.
	Index int
	// Path is the loop, first node first and last: [acme-fe2 acme-fe1 acme-fe2].
	Path []string
	// Definite: every list on the loop is explicit and settled (its node
	// carries the same rollout-id as the admitted node): the loop stays
	// unless someone changes a list.
	Definite bool
	// Defaulted are the edges that come from defaulted lists ("acme-fe2 →
	// acme-fe1"), Landing the nodes on the loop whose rollout-id differs from
	// the admitted node's: a change still landing may yet change their lists.
	Defaulted, Landing []string
}

// String renders the loop as "acme-fe2 → acme-fe1 → acme-fe2".
func (c Cycle) String() string { return strings.Join(c.Path, " → ") }

// waitGraph is who waits for whom, the one graph both admission and the
// planner look for loops in: each node's waits, in the order of its lists.
type waitGraph map[string][]wait

// wait is one edge of a waitGraph: a node waits for node to.
type wait struct {
	to string
	// index is the entry of an explicit list, -1 for a defaulted list
	// (admission).
	index int
	// definite: an explicit list of a node whose rollout-id matches
	// (admission).
	definite bool
	// upgrade: the wait comes from the upgrade list (planner).
	upgrade bool
}

// all follows every wait.
func all(wait) bool { return true }

// path returns a path of waits from "from" to "to" along the waits follow
// accepts, depth first in list order, and whether there is one; the path
// from a node to itself is empty.
func (g waitGraph) path(from, to string, follow func(wait) bool) ([]wait, bool) {
	seen := map[string]bool{}
	var walk func(at string) ([]wait, bool)
	walk = func(at string) ([]wait, bool) {
		if at == to {
			return nil, true
		}
		if seen[at] {
			return nil, false
		}
		seen[at] = true
		for _, w := range g[at] {
			if !follow(w) {
				continue
			}
			if rest, ok := walk(w.to); ok {
				return append([]wait{w}, rest...), true
			}
		}
		return nil, false
	}
	return walk(from)
}

// loop returns a loop of waits from start back to start along the waits
// follow accepts, and whether there is one.
func (g waitGraph) loop(start string, follow func(wait) bool) ([]wait, bool) {
	for _, first := range g[start] {
		if !follow(first) {
			continue
		}
		if rest, ok := g.path(first.to, start, follow); ok {
			return append([]wait{first}, rest...), true
		}
	}
	return nil, false
}

// names renders a loop of waits from start as its nodes, start first and
// last.
func names(start string, loop []wait) []string {
	out := []string{start}
	for _, w := range loop {
		out = append(out, w.to)
	}
	return out
}

// AdmissionCycle finds a loop of one prerequisite list through node, as the
// sequencer would follow it once node is admitted: explicit lists entry by
// entry, a defaulted list as every live node before its node in the reduced
// order. siblings are the other nodes of the tenant; a sibling with node's
// name is ignored in favour of node. A definite loop (explicit, settled
// lists only) is preferred over one that goes through a defaulted list or a
// node whose change has not landed yet.
func AdmissionCycle(node v2alpha1.Node, siblings []v2alpha1.Node, orders defaults.Orders) (Cycle, bool) {
	tenant := []v2alpha1.Node{node}
	for _, n := range siblings {
		if n.GetName() != node.GetName() {
			tenant = append(tenant, n)
		}
	}
	id := node.GetAnnotations()[v2alpha1.AnnotationRolloutID]
	var keys []defaults.Key
	byKey := map[defaults.Key]string{}
	for _, n := range tenant {
		if k, ok := defaults.KeyOf(n); ok && live(n) {
			keys = append(keys, k)
			byKey[k] = n.GetName()
		}
	}
	graphs := map[defaults.List]waitGraph{}
	for _, l := range defaults.Lists {
		graphs[l] = waitGraph{}
		for _, n := range tenant {
			graphs[l][n.GetName()] = listWaits(n, l, l.Order(orders), keys, byKey, n == node || n.GetAnnotations()[v2alpha1.AnnotationRolloutID] == id)
		}
	}
	for _, definiteOnly := range []bool{true, false} {
		for _, l := range defaults.Lists {
			if c, ok := cycleThrough(node.GetName(), l, graphs[l], definiteOnly); ok {
				return c, true
			}
		}
	}
	return Cycle{}, false
}

// cycleThrough finds a loop of list l's waits from start back to start,
// along definite waits only when definiteOnly, and says what it runs through.
func cycleThrough(start string, l defaults.List, g waitGraph, definiteOnly bool) (Cycle, bool) {
	loop, ok := g.loop(start, func(w wait) bool { return w.definite || !definiteOnly })
	if !ok {
		return Cycle{}, false
	}
	c := Cycle{List: l, Path: names(start, loop), Definite: definiteOnly, Index: loop[0].index}
	for i, w := range loop {
		from := c.Path[i]
		if w.index < 0 {
			c.Defaulted = append(c.Defaulted, from+" → "+w.to)
		} else if !w.definite && !slices.Contains(c.Landing, from) {
			c.Landing = append(c.Landing, from)
		}
	}
	return c, true
}

// listWaits returns the waits of node n's list l.
// A defaulted list waits for every live node before n in the reduced order
// (a node that is not live keeps its place, as the sequencer walks through it).
func listWaits(n v2alpha1.Node, l defaults.List, order defaults.Order, liveKeys []defaults.Key, byKey map[defaults.Key]string, settled bool) []wait {
	var out []wait
	if defaults.IsDefaulted(n, l) {
		k, ok := defaults.KeyOf(n)
		if !ok {
			return nil
		}
		keys := liveKeys
		if !slices.Contains(keys, k) {
			keys = append(slices.Clone(keys), k)
		}
		for _, prev := range order.Sequence(keys) {
			if prev == k {
				break
			}
			out = append(out, wait{to: byKey[prev], index: -1})
		}
		return out
	}
	for i, p := range l.Get(n.NodeSpec()) {
		out = append(out, wait{to: p.ExpressNode, index: i, definite: settled})
	}
	return out
}

// waitEdges is the planner's waitGraph: the waits between waiting nodes
// (gated or recovering nodes with unmet requirements). A node that is not
// waiting can progress by itself, so no loop runs through it; a node
// waiting for itself is no loop between nodes.
func (p *planner) waitEdges() waitGraph {
	g := waitGraph{}
	for name, bs := range p.blockers {
		for _, b := range bs {
			if b.node != name && len(p.blockers[b.node]) > 0 {
				g[name] = append(g[name], wait{to: b.node, upgrade: b.upgrade})
			}
		}
	}
	return g
}

// circularUpgradeWaits returns the upgrade prerequisites of x whose wait
// leads, through waiting nodes and at least one provisioning wait, back to
// x: the ones that can never be met while x waits for them. Only those are
// dropped (the provisioning order wins); x still waits for its other
// upgrade prerequisites, such as a node whose half-done rollout must
// finish first.
func (p *planner) circularUpgradeWaits(x string, g waitGraph) []string {
	notThroughX := func(w wait) bool { return w.to != x }
	var out []string
	for _, first := range g[x] {
		if !first.upgrade || slices.Contains(out, first.to) {
			continue
		}
	search:
		for _, u := range p.names {
			for _, w := range g[u] {
				if w.upgrade || u == x {
					continue
				}
				if _, ok := g.path(first.to, u, notThroughX); !ok {
					continue
				}
				if _, ok := g.path(w.to, x, all); ok {
					out = append(out, first.to)
					break search
				}
			}
		}
	}
	return out
}

// findCycles maps every node of a wait-for loop to one loop through it,
// starting and ending at it. A node whose list leads back to it through
// intentionally-down nodes (an explicit list naming a down node whose own
// list puts the node before it) waits for itself: a loop of its own when
// nothing but its release could end that wait — for its new target while
// it is gated, or for Ready when it has no pod that may run (none, or all
// held by the sequencer's scheduling gate, which that same wait holds). A
// wait for Ready while some of its pods run is not: pods restarting in
// place meet it by themselves. Such a wait is no edge of g (it is no loop
// between nodes, and no wait to drop), so it is only reported.
func (p *planner) findCycles(g waitGraph) map[string][]string {
	cycles := map[string][]string{}
	for name := range g {
		if loop, ok := g.loop(name, all); ok {
			cycles[name] = names(name, loop)
		}
	}
	for name, bs := range p.blockers {
		if cycles[name] != nil {
			continue
		}
		i := slices.IndexFunc(bs, func(b blocker) bool { return b.node == name && p.waitsOnlyForItself(name, b) })
		if i < 0 {
			continue
		}
		path := []string{name}
		for _, down := range bs[i].via {
			path = append(path, down+" (down)")
		}
		cycles[name] = append(path, name)
	}
	return cycles
}

// waitsOnlyForItself reports whether b, a wait of node name on itself, can
// end only by the node's release: see findCycles.
func (p *planner) waitsOnlyForItself(name string, b blocker) bool {
	if b.upgrade {
		return gated(p.Nodes[name])
	}
	return !slices.ContainsFunc(p.Pods[name], func(pod Pod) bool { return !pod.HeldBySequencer() })
}

// cycleMessage says that the nodes of a loop can never proceed.
func cycleMessage(path []string) string {
	return fmt.Sprintf("%s wait for each other and can never be released: change a prerequisite or set %s on one of them",
		strings.Join(path, " → "), v2alpha1.AnnotationIgnorePrerequisites)
}
