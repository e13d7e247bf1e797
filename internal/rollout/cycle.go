package rollout

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

// loop returns a loop of waits from start back to start along the waits
// follow accepts, and whether there is one: depth first in list order, the
// first wait first. A node one first wait's search found no way back from
// has none from the next either.
func (g waitGraph) loop(start string, follow func(wait) bool) ([]wait, bool) {
	seen := map[string]bool{}
	var walk func(at string) ([]wait, bool)
	walk = func(at string) ([]wait, bool) {
		if at == start {
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
	for _, first := range g[start] {
		if !follow(first) {
			continue
		}
		if rest, ok := walk(first.to); ok {
			return append([]wait{first}, rest...), true
		}
	}
	return nil, false
}

// onLoops returns the vertices of g that lie on some loop: those of its
// strongly connected components of more than one vertex, or with a wait on
// themselves (Tarjan's algorithm, once for the graph).
func (g waitGraph) onLoops() map[string]bool {
	comp, loops := g.components()
	out := map[string]bool{}
	for v, c := range comp {
		if loops[c] {
			out[v] = true
		}
	}
	return out
}

// components returns, by vertex, the strongly connected component of g it
// lies in, and for each component whether it holds a loop: more than one
// vertex, or a wait on itself (Tarjan's algorithm, once for the graph).
func (g waitGraph) components() (map[string]int, []bool) {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	comp := map[string]int{}
	var loops []bool
	var connect func(v string)
	connect = func(v string) {
		index[v], low[v] = len(index), len(index)
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range g[v] {
			if _, visited := index[w.to]; !visited {
				connect(w.to)
				low[v] = min(low[v], low[w.to])
			} else if onStack[w.to] {
				low[v] = min(low[v], index[w.to])
			}
		}
		if low[v] != index[v] {
			return
		}
		id, size := len(loops), 0
		for {
			top := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			onStack[top] = false
			comp[top] = id
			size++
			if top == v {
				break
			}
		}
		loops = append(loops, size > 1 || slices.ContainsFunc(g[v], func(w wait) bool { return w.to == v }))
	}
	vertices := make([]string, 0, len(g))
	for v := range g {
		vertices = append(vertices, v)
	}
	slices.Sort(vertices)
	for _, v := range vertices {
		if _, visited := index[v]; !visited {
			connect(v)
		}
	}
	return comp, loops
}

// loopFilter tells, without a search, where no loop through a vertex
// through accepts can be: each component of the graph (components), and
// whether it holds such a vertex on a loop.
type loopFilter struct {
	graph   waitGraph
	through func(string) bool
	comp    map[string]int
	holds   []bool
}

// loopFilter is g's, for through, worked out when first asked.
func (g waitGraph) loopFilter(through func(string) bool) *loopFilter {
	return &loopFilter{graph: g, through: through}
}

// mayLoop reports whether, g holding a wait from "to" on "from", a way
// from "from" back to "to" through a vertex through accepts may exist:
// that way and the wait make a loop, all of whose vertices lie in one
// component. False is certain; true asks for the search (loopThrough).
func (f *loopFilter) mayLoop(from, to string) bool {
	if f.comp == nil {
		var loops []bool
		f.comp, loops = f.graph.components()
		f.holds = make([]bool, len(loops))
		for v, c := range f.comp {
			f.holds[c] = f.holds[c] || loops[c] && f.through(v)
		}
	}
	c, ok := f.comp[from]
	return ok && f.comp[to] == c && f.holds[c]
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
		if k, ok := defaults.KeyOf(n); ok && Live(n) {
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

// The planner's waitGraph is one of states, not of nodes: a wait for a
// node's readiness closes a loop only when that readiness itself waits for
// something. Each live node has four states, each a vertex "<state> <node>":
//
//	release X  its release (a gated node)     → ready P or target P for each unmet requirement of it
//	pods X     its held or coming pods start  → ready P for each unmet provisioning requirement
//	                                             (of a rollout under way: only with rollingPods)
//	ready X    X is Ready                      → release X, gated and needing it (needsRelease);
//	                                             pods X, new pods of it coming under the pod rule
//	target X   X is Ready on its target        → release X while gated, else ready X
//	pinned X   X is Ready on the version (or    → target X: a pin that X's pods do not
//	           revision) a requirement pins       meet is met by X's rollout (the user's
//	                                             old chart pins every entry to the
//	                                             version it renders), not by itself
//
// A wait for "pinned X" is a wait for readiness, as one for "ready X" is:
// a loop through it is one the provisioning order breaks.
//
// A state with no edge is reached by itself: a Backend whose pods exist and
// do not fail becomes Ready without anyone's release (a readiness blip, a
// StatefulSet scaling up or recreating pods), so whoever waits for it waits
// and is never overtaken.
const (
	stateRelease = "release"
	statePods    = "pods"
	stateReady   = "ready"
	stateTarget  = "target"
	statePinned  = "pinned"
	// stateUnreachable: a pin the node's own target does not carry either.
	stateUnreachable = "unreachable"
)

// waitVertex is the state a wait on b's node waits for: its target (an
// upgrade wait), Ready on a pin its rollout meets (pinned), a pin no rollout
// of it meets (unreachable: a dead end), or else its readiness. A wait on a
// node that does not exist — or exists only as another kind than the one
// waited for, or under a name a Backend and a Frontend share — is a dead
// end too: it waits for no state of the node that has the name, so no
// loop runs through that node's waits.
func (b blocker) waitVertex() string {
	switch {
	case b.reason == v2alpha1.ReasonPrerequisiteNotFound, b.reason == v2alpha1.ReasonNameShared:
		return vertex(stateUnreachable, b.node)
	case b.upgrade:
		return vertex(stateTarget, b.node)
	case b.pinned && !b.pinAhead:
		return vertex(stateUnreachable, b.node)
	case b.pinned:
		return vertex(statePinned, b.node)
	}
	return vertex(stateReady, b.node)
}

// readiness reports whether vertex v is a wait for a node's readiness.
func readiness(v string) bool {
	return strings.HasPrefix(v, stateReady+" ") || strings.HasPrefix(v, statePinned+" ")
}

// vertex names state of node in the planner's waitGraph.
func vertex(state, node string) string { return state + " " + node }

// vertexNode returns the node of a vertex of the planner's waitGraph.
func vertexNode(v string) string {
	_, node, _ := strings.Cut(v, " ")
	return node
}

// waitEdges builds the planner's waitGraph. releasing are the nodes
// released in this pass (nil before releases are chosen). With letGo, a
// gated node held by a pause or a change landing waits for its requirements
// as it will once let go; without, it waits for nothing (it is held, not in
// a loop). With rollingPods, the held pods of a rollout under way wait for
// their predecessors too (what a node may yet wait for: PodsMayStart);
// without, they wait for no loop, since PodsMayStart lets them go where
// their predecessor waits for the rollout.
func (p *planner) waitEdges(releasing map[string]bool, letGo, rollingPods bool) waitGraph {
	g := waitGraph{}
	add := func(from string, to string, upgrade bool) { g[from] = append(g[from], wait{to: to, upgrade: upgrade}) }
	waitFor := func(from string, b blocker) {
		to := b.waitVertex()
		add(from, to, b.upgrade)
		if to == vertex(statePinned, b.node) {
			add(to, vertex(stateTarget, b.node), false) // only its rollout meets the pin
		}
	}
	for _, name := range p.names {
		n := p.Nodes[name]
		if !Live(n) {
			continue
		}
		rel, pods, ready, tgt := vertex(stateRelease, name), vertex(statePods, name), vertex(stateReady, name), vertex(stateTarget, name)
		ignored := annotated(n, v2alpha1.AnnotationIgnorePrerequisites)
		held := Gated(n) && !releasing[name]
		if held && !ignored {
			waits := p.blockers[name]
			if letGo || releasing != nil {
				waits, _ = p.wait(name, p.mode(name) == ModeUpgrade, releasing)
			}
			for _, b := range waits {
				if b.node == name {
					continue // a wait on itself through down nodes: see findCycles
				}
				waitFor(rel, b)
			}
		}
		if !ignored && (rollingPods || !p.inFlight(name)) {
			podWaits, _ := p.wait(name, false, releasing)
			for _, b := range podWaits {
				if b.node != name {
					waitFor(pods, b)
				}
			}
		}
		if held {
			add(tgt, rel, false)
			if p.needsRelease(name) {
				add(ready, rel, false)
			}
		} else {
			add(tgt, ready, false)
		}
		if p.newPodsComing(name, held) {
			add(ready, pods, false)
		}
	}
	return g
}

// needsRelease reports whether a gated node's readiness waits for its
// release: it has no pod and its pods' controller wants none (nothing starts
// it until the operator provisions it), a pod of it is failing (crash
// looping, its image not pulling: what its new target may mend, and the
// operator re-provisions only once it is released), or a pod of it is held
// for its release (AwaitsRelease). A node whose pods exist or are being
// recreated, none failing, becomes Ready by itself.
func (s *Snapshot) needsRelease(name string) bool {
	pods := s.Pods[name]
	if len(pods) == 0 && s.MissingPods[name] == 0 {
		return true
	}
	return slices.ContainsFunc(pods, func(p Pod) bool {
		return p.Failing || p.HeldBySequencer() && s.AwaitsRelease(name, p.Hash)
	})
}

// newPodsComing reports whether the node's readiness waits for pods the pod
// rule decides on: pods held by the sequencer's scheduling gate, pods its
// controller still wants, or — for a node not held by its gate — pods the
// operator creates next: none left, failing ones re-provisioned, a rollout
// under way replacing pods not yet on target.
func (s *Snapshot) newPodsComing(name string, held bool) bool {
	pods := s.Pods[name]
	if slices.ContainsFunc(pods, Pod.HeldBySequencer) || s.MissingPods[name] > 0 {
		return true
	}
	if held {
		return false
	}
	n := s.Nodes[name]
	return len(pods) == 0 || slices.ContainsFunc(pods, func(p Pod) bool { return p.Failing || !podOnTarget(n, p) })
}

// circularUpgradeWaits returns the upgrade prerequisites of x whose wait
// can never be met while x waits for them, so that the provisioning order
// wins (DESIGN §4): the prerequisite's state leads, through at least one
// wait for readiness, back to x's release. Of those, only the ones that
// tier admits are dropped, tier by tier as long as a loop is left (see
// findWaits):
//
//   - tier 0: the prerequisite is provisioned after x (it needs x Ready,
//     directly or through others): the backend crashed with a new target
//     while the frontends before it in the upgrade order wait for it;
//   - tier 1: x cannot become Ready without its release (needsRelease) and
//     its wait does not follow the provisioning order (x is not
//     provisioned after the prerequisite): the crashed node on the loop goes
//     first;
//   - tier 2: the wait does not follow the provisioning order.
//
// A wait that follows the provisioning order is never dropped (fe2 waiting
// for fe1 while be waits for fe2), nor is one on a node whose half-done
// rollout must finish first (it does not lead back).
//
// filter is g's (loopFilter): a wait in no component with a wait for
// readiness on a loop is not searched (dense lists make many such waits,
// each of which the search would walk to its bound).
func (p *planner) circularUpgradeWaits(x string, g waitGraph, filter *loopFilter, tier int) []string {
	rel := vertex(stateRelease, x)
	var out []string
	for _, w := range g[rel] {
		b := vertexNode(w.to)
		if !w.upgrade || slices.Contains(out, b) {
			continue
		}
		switch tier {
		case 0:
			if !p.provisionedAfter(b, x) {
				continue
			}
		case 1:
			if !p.needsRelease(x) || p.provisionedAfter(x, b) {
				continue
			}
		default:
			if p.provisionedAfter(x, b) {
				continue
			}
		}
		if filter.mayLoop(w.to, rel) && p.loopThrough(g, w.to, rel) {
			out = append(out, b)
		}
	}
	return out
}

// without returns g without the upgrade waits of drops, but keep's: the
// edges "release X → target Y" of X's upgrade wait on Y.
func (g waitGraph) without(drops []dropped, keep dropped) waitGraph {
	out := make(waitGraph, len(g))
	for v, ws := range g {
		out[v] = ws
	}
	for _, d := range drops {
		if d == keep {
			continue
		}
		rel, tgt := vertex(stateRelease, d.node), vertex(stateTarget, d.on)
		out[rel] = slices.DeleteFunc(slices.Clone(out[rel]), func(w wait) bool { return w.to == tgt })
	}
	return out
}

// loopThrough reports whether a loop — a path that visits no vertex twice —
// leads from "from" to "to" through at least one vertex through accepts
// ("to" included). A walk that repeats a vertex runs through another loop
// beside the one sought: a wait for readiness on that other loop breaks
// that loop, not a loop of upgrade waits only that the walk also follows
// (be waits for fe3's target and fe3 for be's: no order releases either,
// whatever loop fe3 is on with a crashed fe2).
//
// Whether two vertices lie on one simple path is, in a directed graph, the
// two disjoint paths problem, which has no known fast answer: the search
// is depth first along simple paths up to the first vertex through accepts
// (those first at each step), and from there any path to "to" that avoids
// the path so far, visiting only vertices that can reach "to". Where it
// runs out of maxLoopSearchSteps, the loop is sought by shortest ways
// (loopByShortestWays); where that finds none either, it answers no: the
// wait is kept, and a node on a loop it cannot tell is held as on a loop,
// never released early.
func (g waitGraph) loopThrough(from, to string, through func(string) bool) bool {
	found, _, _ := g.loopThroughCounted(from, to, through)
	return found
}

// loopThroughCounted is loopThrough, with the work it did in waits
// followed (about: each walk of the graph counts all its waits), and
// whether its answer is sure: a no is sure only where the depth-first
// search ended within maxLoopSearchSteps, having tried every way; the
// shortest ways it tries next find a loop or say nothing.
func (g waitGraph) loopThroughCounted(from, to string, through func(string) bool) (found bool, work int, sure bool) {
	edges := g.edges()
	leadsTo := g.reaching(to)
	found, steps := g.loopByDepthFirst(from, to, through, leadsTo)
	work = edges + steps*(2*edges/max(1, len(g))+1) // each step looks at its waits twice
	if found || steps < maxLoopSearchSteps {
		return found, work, true
	}
	found, tries := g.loopByShortestWays(from, to, through, leadsTo)
	return found, work + edges*(1+4*tries), found
}

// loopThrough is g.loopThrough for a wait for readiness, within the
// pass's budget: once its searches have followed maxLoopWorkPerPlan waits,
// it answers no — the wait is kept, never dropped, and the node held as on
// a loop (a cost to progress, never to the order) — so that lists dense
// enough to make every wait circular (each search walking a graph of tens
// of thousands of waits, for each of them) cannot hold a pass for
// minutes.
//
// A search that answers no without having tried every way (it ran out of
// maxLoopSearchSteps) keeps its wait too, and is noted (loopsUnsure).
func (p *planner) loopThrough(g waitGraph, from, to string) bool {
	if p.loopWork >= maxLoopWorkPerPlan {
		return false
	}
	found, work, sure := g.loopThroughCounted(from, to, readiness)
	p.loopWork += work
	p.unsure = p.unsure || !sure
	return found
}

// edges counts g's waits.
func (g waitGraph) edges() int {
	n := 0
	for _, ws := range g {
		n += len(ws)
	}
	return n
}

// loopByDepthFirst is loopThrough's depth-first search, and the steps it
// took: maxLoopSearchSteps where it ran out.
func (g waitGraph) loopByDepthFirst(from, to string, through func(string) bool, leadsTo map[string]bool) (found bool, steps int) {
	onPath := map[string]bool{}
	var walk func(v string) bool
	walk = func(v string) bool {
		if v == to {
			return through(v)
		}
		if onPath[v] || !leadsTo[v] || steps >= maxLoopSearchSteps {
			return false
		}
		steps++
		onPath[v] = true
		defer delete(onPath, v)
		if through(v) {
			return g.reachesAvoiding(v, to, onPath)
		}
		for _, readinessFirst := range []bool{true, false} { // the shortest way to a bounded search
			for _, w := range g[v] {
				if through(w.to) == readinessFirst && walk(w.to) {
					return true
				}
			}
		}
		return false
	}
	found = walk(from)
	return found, steps
}

// loopByShortestWays looks, for each vertex through accepts on a way from
// "from" to "to", for two ways that share only it: the shortest way there
// and a way on that avoids it, or the shortest way on and a way there that
// avoids that. Each found is a loop; none found proves nothing (the ways
// that share no vertex need not include a shortest one), so it answers
// only where the depth-first search ran out. Each vertex costs two
// breadth-first searches and two searches that avoid their result; it
// tries as many as maxShortestWaysSteps allows, then keeps the wait.
// It returns the vertices it tried too.
func (g waitGraph) loopByShortestWays(from, to string, through func(string) bool, leadsTo map[string]bool) (bool, int) {
	if through(to) {
		return leadsTo[from], 0 // the depth-first search ends at "to" on any way
	}
	budget := max(1, maxShortestWaysSteps/(4*(g.edges()+1))) // each try walks the graph up to four times
	tried := 0
	for _, r := range g.reachableWithin(from, leadsTo) {
		switch {
		case tried == budget:
			return false, tried // out of steps: the wait is kept
		case !through(r):
		case r == from:
			return g.reachesAvoiding(from, to, nil), tried // as the depth-first search asks
		default:
			// Neither way may pass "to" on the way to r, nor "from" on the
			// way on.
			tried++
			if there := g.shortestWay(from, r, map[string]bool{to: true}); there != nil && g.reachesAvoiding(r, to, less(there, r)) {
				return true, tried
			}
			if on := g.shortestWay(r, to, map[string]bool{from: true}); on != nil && g.shortestWay(from, r, less(on, r)) != nil {
				return true, tried
			}
		}
	}
	return false, tried
}

// reachableWithin returns the vertices a way from "from" reaches through
// vertices of within only ("from" included), in the order a breadth-first
// search meets them.
func (g waitGraph) reachableWithin(from string, within map[string]bool) []string {
	out := []string{from}
	seen := map[string]bool{from: true}
	for i := 0; i < len(out); i++ {
		for _, w := range g[out[i]] {
			if !seen[w.to] && within[w.to] {
				seen[w.to] = true
				out = append(out, w.to)
			}
		}
	}
	return out
}

// shortestWay returns the vertices of a shortest way from "from" to "to"
// through none of avoid ("from" and "to" included), nil where there is
// none.
func (g waitGraph) shortestWay(from, to string, avoid map[string]bool) map[string]bool {
	parent := map[string]string{from: ""}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, w := range g[cur] {
			if _, seen := parent[w.to]; seen || avoid[w.to] {
				continue
			}
			parent[w.to] = cur
			if w.to == to {
				way := map[string]bool{}
				for v := to; v != ""; v = parent[v] {
					way[v] = true
				}
				return way
			}
			queue = append(queue, w.to)
		}
	}
	return nil
}

// less is set without v.
func less(set map[string]bool, v string) map[string]bool {
	out := make(map[string]bool, len(set))
	for k := range set {
		if k != v {
			out[k] = true
		}
	}
	return out
}

// maxShortestWaysSteps bounds loopByShortestWays: the waits it may follow
// in all, about; each vertex it tries costs up to four walks of the whole
// graph, and at least one is tried.
const maxShortestWaysSteps = 1_000_000

// maxLoopWorkPerPlan bounds the work of one pass's loop searches, in waits
// looked at (planner.loopThrough), with the graphs made for them: about a
// second of one of this machine's cores. The default lists of a tenant of
// 200 nodes, the backend crash-looping, need about 165,000 (BenchmarkPlan);
// 20 nodes whose every upgrade list names every other node, the backend
// crash-looping, 4.5 million; 30 such nodes run it out, and then every
// wait is kept (findWaits).
const maxLoopWorkPerPlan = 10_000_000

// maxLoopSearchSteps bounds loopThrough's search. The default lists of a
// tenant of 200 nodes, a crash included, end every search within it
// (TestTheDefaultListsOf200NodesWithACrashAreSearchedToTheEnd; where no
// loop through readiness can be, loopFilter spares the search); dense
// explicit lists can need more to find one. Run out, the wait is kept:
// the node is held as on a loop, and the pass makes no exception that
// rests on loops (loopsUnsure) — a cost to progress, never to the order.
const maxLoopSearchSteps = 20000

// Why a pass's loop searches were cut short (Decision.LoopsUnsure), as
// express_sequencer_tenants_loops_unsure labels them.
const (
	// LoopsOutOfBudget: the pass's searches ran out of their budget
	// (maxLoopWorkPerPlan).
	LoopsOutOfBudget = "budget"
	// LoopsOutOfSteps: a search ran out of its steps (maxLoopSearchSteps).
	LoopsOutOfSteps = "steps"
)

// reaching returns the vertices of g from which a path leads to "to" ("to"
// included).
func (g waitGraph) reaching(to string) map[string]bool {
	into := map[string][]string{}
	for v, ws := range g {
		for _, w := range ws {
			into[w.to] = append(into[w.to], v)
		}
	}
	out := map[string]bool{to: true}
	queue := []string{to}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, v := range into[cur] {
			if !out[v] {
				out[v] = true
				queue = append(queue, v)
			}
		}
	}
	return out
}

// reachesAvoiding reports whether a path leads from vertex from to vertex
// to through none of the vertices avoid holds (from excepted).
func (g waitGraph) reachesAvoiding(from, to string, avoid map[string]bool) bool {
	seen := map[string]bool{from: true}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, w := range g[cur] {
			if w.to == to {
				return true
			}
			if !seen[w.to] && !avoid[w.to] {
				seen[w.to] = true
				queue = append(queue, w.to)
			}
		}
	}
	return false
}

// reachesNode reports whether some state of node target can be reached from
// vertex from.
func (g waitGraph) reachesNode(from, target string) bool {
	seen := map[string]bool{}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if vertexNode(cur) == target {
			return true
		}
		if seen[cur] {
			continue
		}
		seen[cur] = true
		for _, w := range g[cur] {
			queue = append(queue, w.to)
		}
	}
	return false
}

// provisionedAfter reports whether node b waits, for its provisioning,
// for node x to be Ready: x is among its provisioning requirements,
// directly or through others (through down nodes as the lists are walked).
// The closure of b's requirements is memoised for the pass: the loop
// breaking asks this of every wait, tier by tier.
func (p *planner) provisionedAfter(b, x string) bool {
	if c, ok := p.provisionedClosure[b]; ok {
		return c[x]
	}
	closure := map[string]bool{}
	seen := map[string]bool{b: true}
	queue := []string{b}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if _, ok := p.Nodes[cur]; !ok {
			continue
		}
		for _, r := range p.provisioningOf(cur) {
			closure[r] = true
			if !seen[r] {
				seen[r] = true
				queue = append(queue, r)
			}
		}
	}
	p.provisionedClosure[b] = closure
	return closure[x]
}

// provisioningOf returns the live nodes node name's provisioning list
// resolves to, memoised for the pass.
func (p *planner) provisioningOf(name string) []string {
	if nodes, ok := p.provisioning[name]; ok {
		return nodes
	}
	var nodes []string
	for _, r := range p.requirements(name, false) {
		if !r.missing && !slices.Contains(nodes, r.node) {
			nodes = append(nodes, r.node)
		}
	}
	p.provisioning[name] = nodes
	return nodes
}

// findCycles maps every waiting node whose own state — its release while
// gated, its new pods while recovering — lies on a loop of g to the loop,
// as nodes, starting and ending at it. A node whose list leads back to it through
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
	onLoops := g.onLoops() // a search for a loop only from where there is one
	for name, bs := range p.blockers {
		if len(bs) == 0 {
			continue
		}
		start := vertex(statePods, name)
		if Gated(p.Nodes[name]) {
			start = vertex(stateRelease, name)
		}
		if !onLoops[start] {
			continue
		}
		if loop, ok := g.loop(start, all); ok {
			cycles[name] = loopNodes(start, loop)
		}
	}
	for name, bs := range p.blockers {
		if cycles[name] != nil {
			continue
		}
		// A Frontend with the Backend's name waits for a Backend of that
		// name, which it is not: no loop, a node missing.
		i := slices.IndexFunc(bs, func(b blocker) bool {
			return b.node == name && b.reason != v2alpha1.ReasonPrerequisiteNotFound && p.waitsOnlyForItself(name, b)
		})
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

// loopNodes renders a loop of the planner's waitGraph from start as its
// nodes, each state change of one node shown once: start's node first and
// last.
func loopNodes(start string, loop []wait) []string {
	out := []string{vertexNode(start)}
	for _, w := range loop {
		if n := vertexNode(w.to); n != out[len(out)-1] {
			out = append(out, n)
		}
	}
	return out
}

// waitsOnlyForItself reports whether b, a wait of node name on itself, can
// end only by the node's release: see findCycles.
func (p *planner) waitsOnlyForItself(name string, b blocker) bool {
	if b.upgrade {
		return Gated(p.Nodes[name])
	}
	return !slices.ContainsFunc(p.Pods[name], func(pod Pod) bool { return !pod.HeldBySequencer() })
}

// cycleMessage is cycleMessage of node name's loop, saying where the
// pass's loop searches ran out of their budget.
func (p *planner) cycleMessage(name string) string {
	m := cycleMessage(p.cycles[name])
	if p.outOfLoopBudget() {
		m += outOfBudgetNote
	}
	return m
}

// cycleMessage says that the nodes of a loop can never proceed.
func cycleMessage(path []string) string {
	return fmt.Sprintf("%s wait for each other and can never be released: change a prerequisite or set %s on one of them",
		strings.Join(path, " → "), v2alpha1.AnnotationIgnorePrerequisites)
}
