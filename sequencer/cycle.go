package sequencer

import (
	"strings"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/defaults"
)

// Cycle is a loop of explicit prerequisites that starts and ends at one node:
// none of its nodes could ever be released.
type Cycle struct {
	// List is the prerequisite list the loop runs through.
	List defaults.List
	// Index is the entry of the first node's list that starts the loop.
	Index int
	// Path is the loop, first node first and last: [acme-fe2 acme-fe1 acme-fe2].
	Path []string
}

// String renders the loop as "acme-fe2 → acme-fe1 → acme-fe2".
func (c Cycle) String() string { return strings.Join(c.Path, " → ") }

// ExplicitCycle finds a loop through explicit (not defaulted) prerequisites
// of one list that passes through node. siblings are the other nodes of the
// tenant; a sibling with node's name is ignored in favour of node, so the
// check sees the tenant as it would be after admitting node.
func ExplicitCycle(node v2alpha1.Node, siblings []v2alpha1.Node) (Cycle, bool) {
	for _, l := range defaults.Lists {
		edges := map[string][]string{}
		for _, n := range append(siblings, node) {
			if n != node && n.GetName() == node.GetName() {
				continue
			}
			if defaults.IsDefaulted(n, l) {
				continue
			}
			for _, p := range l.Get(n.NodeSpec()) {
				edges[n.GetName()] = append(edges[n.GetName()], p.ExpressNode)
			}
		}
		start := node.GetName()
		for i, first := range edges[start] {
			if path, ok := pathTo(edges, first, start, map[string]bool{}); ok {
				return Cycle{List: l, Index: i, Path: append([]string{start}, path...)}, true
			}
		}
	}
	return Cycle{}, false
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
