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

// edge is one wait of a prerequisite list: from a node to one it waits for.
type edge struct {
	to string
	// index is the entry of an explicit list, -1 for a defaulted list.
	index int
	// definite: an explicit list of a node whose rollout-id matches.
	definite bool
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
	edges := map[defaults.List]map[string][]edge{}
	for _, l := range defaults.Lists {
		edges[l] = map[string][]edge{}
		for _, n := range tenant {
			edges[l][n.GetName()] = listEdges(n, l, l.Order(orders), keys, byKey, n == node || n.GetAnnotations()[v2alpha1.AnnotationRolloutID] == id)
		}
	}
	for _, definiteOnly := range []bool{true, false} {
		for _, l := range defaults.Lists {
			if c, ok := cycleThrough(node.GetName(), l, edges[l], definiteOnly); ok {
				return c, true
			}
		}
	}
	return Cycle{}, false
}

// cycleThrough finds a loop of list l's edges from start back to start,
// along definite edges only when definiteOnly, and says what it runs through.
func cycleThrough(start string, l defaults.List, edges map[string][]edge, definiteOnly bool) (Cycle, bool) {
	names := map[string][]string{}
	for from, es := range edges {
		for _, e := range es {
			if e.definite || !definiteOnly {
				names[from] = append(names[from], e.to)
			}
		}
	}
	for _, first := range names[start] {
		path, ok := pathTo(names, first, start, map[string]bool{})
		if !ok {
			continue
		}
		c := Cycle{List: l, Path: append([]string{start}, path...), Definite: definiteOnly, Index: -1}
		for i := 0; i+1 < len(c.Path); i++ {
			from, to := c.Path[i], c.Path[i+1]
			e := edges[from][slices.IndexFunc(edges[from], func(e edge) bool { return e.to == to })]
			if i == 0 {
				c.Index = e.index
			}
			if e.index < 0 {
				c.Defaulted = append(c.Defaulted, from+" → "+to)
			} else if !e.definite && !slices.Contains(c.Landing, from) {
				c.Landing = append(c.Landing, from)
			}
		}
		return c, true
	}
	return Cycle{}, false
}

// listEdges returns the waits of node n's list l.
// A defaulted list waits for every live node before n in the reduced order
// (a node that is not live keeps its place, as the sequencer walks through it).
func listEdges(n v2alpha1.Node, l defaults.List, order defaults.Order, liveKeys []defaults.Key, byKey map[defaults.Key]string, settled bool) []edge {
	var out []edge
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
			out = append(out, edge{to: byKey[prev], index: -1})
		}
		return out
	}
	for i, p := range l.Get(n.NodeSpec()) {
		out = append(out, edge{to: p.ExpressNode, index: i, definite: settled})
	}
	return out
}

// pathTo returns a path of edges from "from" to "to", both included.
func pathTo(edges map[string][]string, from, to string, seen map[string]bool) ([]string, bool) {
	if from == to {
		return []string{to}, true
	}
	if seen[from] {
		return nil, false
	}
	seen[from] = true
	for _, next := range edges[from] {
		if rest, ok := pathTo(edges, next, to, seen); ok {
			return append([]string{from}, rest...), true
		}
	}
	return nil, false
}

// waitEdges are the wait-for edges between waiting nodes (gated or
// recovering nodes with unmet requirements): a node that is not waiting can
// progress by itself, so no loop runs through it.
func (p *planner) waitEdges() map[string][]blocker {
	edges := map[string][]blocker{}
	for name, bs := range p.blockers {
		for _, b := range bs {
			if len(p.blockers[b.node]) > 0 {
				edges[name] = append(edges[name], b)
			}
		}
	}
	return edges
}

// loops returns the strongly connected components of the wait-for graph
// that hold a loop: sets of nodes each waiting, through the others, for
// itself. Each is sorted, and the list is sorted by first node.
func (p *planner) loops(edges map[string][]blocker) [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for _, b := range edges[v] {
			if _, seen := index[b.node]; !seen {
				visit(b.node)
				low[v] = min(low[v], low[b.node])
			} else if onStack[b.node] {
				low[v] = min(low[v], index[b.node])
			}
		}
		if low[v] != index[v] {
			return
		}
		var scc []string
		for {
			w := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[w] = false
			scc = append(scc, w)
			if w == v {
				break
			}
		}
		if len(scc) > 1 {
			slices.Sort(scc)
			out = append(out, scc)
		}
	}
	for _, name := range p.names {
		if _, seen := index[name]; !seen && len(p.blockers[name]) > 0 {
			visit(name)
		}
	}
	slices.SortFunc(out, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
	return out
}

// circularUpgradeWaits returns the upgrade prerequisites of x whose wait
// leads, through waiting nodes and at least one provisioning wait, back to
// x: the ones that can never be met while x waits for them. Only those are
// dropped (the provisioning order wins); x still waits for its other
// upgrade prerequisites, such as a node whose half-done rollout must
// finish first.
func (p *planner) circularUpgradeWaits(x string, edges map[string][]blocker) []string {
	type state struct {
		node string
		prov bool
	}
	var out []string
	for _, first := range edges[x] {
		if !first.upgrade || slices.Contains(out, first.node) {
			continue
		}
		queue := []state{{first.node, false}}
		seen := map[state]bool{}
		for len(queue) > 0 {
			st := queue[0]
			queue = queue[1:]
			if st.node == x {
				if st.prov {
					out = append(out, first.node)
					break
				}
				continue
			}
			if seen[st] {
				continue
			}
			seen[st] = true
			for _, b := range edges[st.node] {
				queue = append(queue, state{b.node, st.prov || !b.upgrade})
			}
		}
	}
	return out
}

// findCycles maps every node of a wait-for loop to one loop through it,
// starting and ending at it.
func (p *planner) findCycles(edges map[string][]blocker) map[string][]string {
	next := map[string][]string{}
	for name, bs := range edges {
		for _, b := range bs {
			if !slices.Contains(next[name], b.node) {
				next[name] = append(next[name], b.node)
			}
		}
	}
	cycles := map[string][]string{}
	for _, loop := range p.loops(edges) {
		for _, name := range loop {
			for _, first := range next[name] {
				if path, ok := pathTo(next, first, name, map[string]bool{}); ok {
					cycles[name] = append([]string{name}, path...)
					break
				}
			}
		}
	}
	return cycles
}

// cycleMessage says that the nodes of a loop can never proceed.
func cycleMessage(path []string) string {
	return fmt.Sprintf("%s wait for each other and can never be released: change a prerequisite or set %s on one of them",
		strings.Join(path, " → "), v2alpha1.AnnotationIgnorePrerequisites)
}
