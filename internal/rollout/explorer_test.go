package rollout

// Exhaustive exploration of small tenants: every interleaving of the
// sequencer's pass, the operator's step and the world's events, up to a
// depth, deduplicating states. Every release of a node and of a pod on the
// way is held against the oracle (oracle_test.go), which reads the world's
// truth (what crashed, what blips, what a StatefulSet still creates) and not
// the planner's reading of pods; every state reached at the full depth is
// then run to convergence (no deadlock).

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// explorerBudget is how deep an exploration goes: actions in all, and of
// those the world's events (the rest are sequencer passes and operator
// steps). EXPLORE_DEPTH and EXPLORE_EVENTS set them (make explore).
func explorerBudget(t *testing.T) (depth, events int) {
	depth, events = 8, 2
	if testing.Short() {
		depth, events = 6, 1
	}
	for name, v := range map[string]*int{"EXPLORE_DEPTH": &depth, "EXPLORE_EVENTS": &events} {
		if s := os.Getenv(name); s != "" {
			n, err := strconv.Atoi(s)
			require.NoError(t, err, name)
			*v = n
		}
	}
	return depth, events
}

// An exploration is one tenant shape explored from its settled state.
type exploration struct {
	name string
	size int
	// oldChart: the tenant carries the old chart's explicit lists.
	oldChart bool
	// rolloutID: nodes carry rollout-id; renders land node by node.
	rolloutID bool
	// settle: changes are grouped by the default settle time.
	settle bool
	// heldBackend: be starts the exploration paused and gated for a change
	// (its upgrade waits for the frontends on target): what a recovery
	// behind it waits for.
	heldBackend bool
	// overtaken: this node starts the exploration released for a change to all
	// (v2) that its operator has not carried out, held by another
	// system's rollout gate; the world may revert every node to v1 and
	// back, and lift that gate.
	overtaken string
	// pinned: the old chart's lists with every entry pinned to the version
	// rendered for the node it names (seeds/004); a render pins what it
	// lands, a kubectl edit of a version leaves pins naming it stale.
	pinned bool
	// recreate: the world may delete a node and create it again at once,
	// its old StatefulSet and pods left to the garbage collector.
	recreate bool
	// overtakenMidRollout: this node starts the exploration released for a
	// change to all (v2) and rolling it, its pods not Ready until the world
	// lets them; every node then changed again (v3) and this one changed
	// back to v2 before its release: gated on the target it was released
	// for, its rollout not converged.
	overtakenMidRollout string
	// dropped: nodes carry rollout-id, and the renders of the exploration
	// no longer render this node (dropped from the values, not pruned):
	// they land at the others only, and say so (AnnotationRenderedNodes).
	dropped string
}

// action is one step of an interleaving: a sequencer pass, an operator
// step, or an event of the world.
type action struct {
	name  string
	event bool
	do    func(w *world)
}

// actions lists what may happen next to a tenant of the exploration.
func (e exploration) actions() []action {
	keys := keysOf(e.size)
	acts := []action{
		{name: "sequencer", do: func(w *world) { w.tick++; w.sequence() }},
		{name: "operator", do: func(w *world) { w.tick++; w.operate() }},
		{name: "clock+11s", event: true, do: func(w *world) { w.now = w.now.Add(11 * time.Second) }},
		{name: "change all", event: true, do: func(w *world) { w.setVersion(nextVersion(w), keys...) }},
		{name: "config all", event: true, do: func(w *world) { w.setConfig(nextVersion(w), keys...) }},
		{name: "evict all", event: true, do: func(w *world) { w.evict(keys...) }},
	}
	if e.overtaken != "" {
		acts = append(acts, action{name: "revert all (v2 ⇄ v1)", event: true, do: func(w *world) {
			back := v2
			if slices.ContainsFunc(keys, func(k string) bool { n := w.nodes[w.name(k)]; return n != nil && n.NodeSpec().ExpressVersion == v2 }) {
				back = v1
			}
			w.setVersion(back, liveKeys(w, keys)...)
		}})
		for _, up := range []bool{false, true} {
			name := "revert all (v2 ⇄ v1), " + e.overtaken + " taken down in the same write"
			if up {
				name = "revert all (v2 ⇄ v1), " + e.overtaken + " brought back up in the same write"
			}
			acts = append(acts, action{name: name, event: true, do: func(w *world) {
				back := v2
				if slices.ContainsFunc(keys, func(k string) bool { n := w.nodes[w.name(k)]; return n != nil && n.NodeSpec().ExpressVersion == v2 }) {
					back = v1
				}
				for _, k := range keys {
					if n := w.nodes[w.name(k)]; n == nil || n.GetDeletionTimestamp() != nil {
						continue
					}
					w.update(k, func(n v2alpha1.Node) {
						n.NodeSpec().ExpressVersion = back
						if k == e.overtaken {
							n.NodeSpec().Up = boolPtr(up)
						}
					})
				}
			}})
		}
	}

	for _, k := range keys {
		acts = append(acts,
			action{name: "change " + k, event: true, do: func(w *world) { w.setVersion(nextVersion(w), k) }},
			action{name: "crash " + k, event: true, do: func(w *world) { w.crash(k) }},
			action{name: "evict " + k, event: true, do: func(w *world) { w.evict(k) }},
			action{name: "lose pods of " + k, event: true, do: func(w *world) { w.lose(k) }},
			action{name: "blip " + k, event: true, do: func(w *world) { w.blip(k) }},
			action{name: "scale up " + k, event: true, do: func(w *world) { w.scaleUp(k) }},
			action{name: "toggle up " + k, event: true, do: func(w *world) {
				w.update(k, func(n v2alpha1.Node) { n.NodeSpec().Up = boolPtr(!n.NodeSpec().IsUp()) })
			}},
			action{name: "toggle pause " + k, event: true, do: func(w *world) {
				n := w.nodes[w.name(k)]
				if n == nil {
					return // deleted
				}
				paused := annotated(n, v2alpha1.AnnotationPauseRollout)
				w.annotate(k, v2alpha1.AnnotationPauseRollout, map[bool]string{false: "true"}[paused])
			}},
		)
		if !e.oldChart {
			// The old chart's lists name every node: a node deleted from
			// them is waited for forever (PrerequisiteNotFound, documented).
			acts = append(acts, action{name: "delete " + k, event: true, do: func(w *world) {
				if n := w.nodes[w.name(k)]; n != nil && n.GetDeletionTimestamp() == nil {
					w.remove(k)
				}
			}})
		}
		if k == e.overtakenMidRollout {
			acts = append(acts, action{name: "the pods of " + k + " may become Ready", event: true, do: func(w *world) {
				delete(w.stuck, w.name(k))
			}})
		}
		if k == e.overtaken {
			acts = append(acts, action{name: "lift the other gate from " + k, event: true, do: func(w *world) {
				w.liftOtherSystemsGate(k)
			}})
		}
		if e.recreate {
			acts = append(acts, action{name: "delete and create again " + k, event: true, do: func(w *world) { w.recreate(k) }})
		}
		if e.rolloutID && k != e.dropped {
			// A render lands at one node: the render after the newest one
			// any node carries, or that one where it is not complete yet.
			acts = append(acts, action{name: "render lands at " + k, event: true, do: func(w *world) { renderLands(w, k, e.pinned, e.rendered()) }})
		}
	}
	return acts
}

// rendered returns the nodes the exploration's renders render: every node
// but the one dropped from them; nil when none is (the renders then say
// nothing of it).
func (e exploration) rendered() []string {
	if e.dropped == "" {
		return nil
	}
	return slices.DeleteFunc(keysOf(e.size), func(k string) bool { return k == e.dropped })
}

func boolPtr(b bool) *bool { return &b }

// nextVersion returns a version no node carries yet.
func nextVersion(w *world) string {
	w.uidSeq++
	return fmt.Sprintf("express-x%d", w.uidSeq)
}

// renderLands applies the newest render to node k: the render whose
// rollout-id is the highest any node carries if k lacks it, a new render
// otherwise. A render changes the version of every node; with pinned
// lists, it pins every entry of k's lists to that version.
func renderLands(w *world, k string, pinned bool, rendered []string) {
	newest := 0
	for _, n := range w.nodes {
		if id, err := strconv.Atoi(strings.TrimPrefix(n.GetAnnotations()[v2alpha1.AnnotationRolloutID], "r")); err == nil && id > newest {
			newest = id
		}
	}
	n := w.nodes[w.name(k)]
	if n == nil {
		return
	}
	if n.GetAnnotations()[v2alpha1.AnnotationRolloutID] == fmt.Sprintf("r%d", newest) {
		newest++
	}
	w.update(k, func(n v2alpha1.Node) {
		n.NodeSpec().ExpressVersion = fmt.Sprintf("express-r%d", newest)
		if rendered != nil {
			w.renderOf(n, fmt.Sprintf("r%d", newest), rendered)
		} else {
			setAnnotation(n, v2alpha1.AnnotationRolloutID, fmt.Sprintf("r%d", newest))
		}
		if pinned {
			pinEntries(n.NodeSpec(), func(string) (string, string, bool) { return n.NodeSpec().ExpressVersion, "", true })
		}
	})
}

// setup settles the exploration's tenant.
func (e exploration) setup(t testing.TB) *world {
	w := newWorld(t, "t")
	switch {
	case e.pinned:
		pinnedOldChart(w, e.size, v1)
	case e.oldChart:
		oldChart(e.size)(w)
	default:
		w.tenant(e.size, v1)
	}
	if e.rolloutID {
		w.setRolloutID("r1", keysOf(e.size)...)
	}
	if e.settle {
		bySettleTime(w)
	}
	w.run(400)
	if e.heldBackend {
		w.annotate("be", v2alpha1.AnnotationPauseRollout, "true")
		w.setVersion(v2, "be")
		ticks(3)(w)
	}
	if e.overtaken != "" {
		w.toggleOtherSystemsGate(e.overtaken)
		w.setVersion(v2, keysOf(e.size)...)
		w.stepUntilReleased(e.overtaken) // its operator held
	}
	if k := e.overtakenMidRollout; k != "" {
		name := w.name(k)
		w.stuck[name] = true
		w.setVersion(v2, keysOf(e.size)...)
		w.stepUntilReleased(k)
		for i := 0; len(w.pods[name]) == 0 || w.pods[name][0].Hash != StampedTarget(w.nodes[name]); i++ {
			if i == 200 {
				t.Fatalf("%s never rolled:\n%s", k, w.dump())
			}
			w.step()
		}
		w.setVersion("express-3", keysOf(e.size)...)
		w.setVersion(v2, k)
	}
	w.log = nil
	w.rollTicks = 1 // a rollout is Ready at the operator's next step: deeper in fewer actions
	return w
}

// clone copies the world deeply enough that stepping the copy leaves the
// original as it was.
func (w *world) clone() *world {
	c := *w
	c.nodes = make(map[string]v2alpha1.Node, len(w.nodes))
	for name, n := range w.nodes {
		c.nodes[name] = n.DeepCopyObject().(v2alpha1.Node)
	}
	c.pods = make(map[string][]Pod, len(w.pods))
	for name, pods := range w.pods {
		out := make([]Pod, len(pods))
		for i, p := range pods {
			p.Conditions = maps.Clone(p.Conditions)
			p.Gates = slices.Clone(p.Gates)
			out[i] = p
		}
		c.pods[name] = out
	}
	c.rolling, c.crashed, c.blipped, c.scaling = maps.Clone(w.rolling), maps.Clone(w.crashed), maps.Clone(w.blipped), maps.Clone(w.scaling)
	c.missing, c.stuck, c.lastHash = maps.Clone(w.missing), maps.Clone(w.stuck), maps.Clone(w.lastHash)
	c.setCurrent, c.convergedSince, c.releasedBare = maps.Clone(w.setCurrent), maps.Clone(w.convergedSince), maps.Clone(w.releasedBare)
	c.seenConverged = maps.Clone(w.seenConverged)
	c.targetWrite, c.idWrite, c.brokenTarget = maps.Clone(w.targetWrite), maps.Clone(w.idWrite), maps.Clone(w.brokenTarget)
	c.scaledDown, c.renders, c.renderOrder = maps.Clone(w.scaledDown), maps.Clone(w.renders), slices.Clone(w.renderOrder)
	c.setGen, c.genAtRelease, c.setSpec = maps.Clone(w.setGen), maps.Clone(w.genAtRelease), maps.Clone(w.setSpec)
	c.scaleUps, c.lastRun = maps.Clone(w.scaleUps), maps.Clone(w.lastRun)
	c.gone = make(map[string]*goneWorkload, len(w.gone))
	for name, g := range w.gone {
		gc := *g
		gc.pods = make([]Pod, len(g.pods))
		for i, p := range g.pods {
			p.Conditions = maps.Clone(p.Conditions)
			gc.pods[i] = p
		}
		c.gone[name] = &gc
	}
	c.log, c.started, c.phases = slices.Clone(w.log), slices.Clone(w.started), slices.Clone(w.phases)
	c.startedAt, c.startedTarget = slices.Clone(w.startedAt), slices.Clone(w.startedTarget)
	return &c
}

// stateKey is the world's state, for deduplication: what the planner, the
// operator and the oracle read; not the log, the tick or what started.
func (w *world) stateKey() string {
	type nodeState struct {
		Spec        any
		Annotations map[string]string
		Conditions  any
		Generation  int64
		Deleting    bool
		Pods        []Pod
		Rolling     int
		Crashed     int
		Blipped     int
		Scaling     int
		LastHash    string
		SetCurrent  string
		Converged   string
		Seen        string
		Bare        bool
		// WithoutNewID is what the oracle reads of the world's record
		// of writes.
		WithoutNewID bool
		Broken       string
		ScaledDown   bool
		Stuck        bool
		// The StatefulSet's generation, the one the latest release read,
		// what its spec was, how often it was scaled up, and the target its
		// pods last started on.
		SetGen, GenAtRelease int64
		SetSpec, LastRun     string
		ScaleUps             int
		// Gone is what is left of an earlier node of the name.
		Gone *goneState
	}
	state := map[string]nodeState{}
	for name, n := range w.nodes {
		state[name] = nodeState{
			Spec: n.NodeSpec(), Annotations: n.GetAnnotations(), Conditions: n.NodeStatus().Conditions,
			Generation: n.GetGeneration(), Deleting: n.GetDeletionTimestamp() != nil, Pods: w.pods[name],
			Rolling: w.rolling[name], Crashed: w.crashed[name], Blipped: w.blipped[name], Scaling: w.scaling[name], LastHash: w.lastHash[name],
			SetCurrent: w.setCurrent[name], Converged: w.convergedSince[name], Seen: w.seenConverged[name], Bare: w.releasedBare[name],
			WithoutNewID: w.changedWithoutNewID(name), Broken: w.brokenTarget[name], ScaledDown: w.scaledDown[name],
			Stuck: w.stuck[name], SetGen: w.setGen[name], GenAtRelease: w.genAtRelease[name], SetSpec: w.setSpec[name],
			LastRun: w.lastRun[name], ScaleUps: w.scaleUps[name],
		}
	}
	for name, st := range state {
		if g := w.gone[name]; g != nil {
			st.Gone = &goneState{UID: string(g.node.GetUID()), Pods: g.pods, Hash: g.hash, Looks: g.looks}
		}
		state[name] = st
	}
	data, err := json.Marshal(struct {
		Now         time.Time
		Nodes       map[string]nodeState
		Renders     map[string][]string
		RenderOrder []string
	}{w.now, state, w.renders, w.renderOrder})
	if err != nil {
		w.t.Fatal(err)
	}
	return string(data)
}

// goneState is what stateKey reads of a goneWorkload.
type goneState struct {
	UID   string
	Pods  []Pod
	Hash  string
	Looks int
}

// explored counts what an exploration did.
type explored struct {
	states, leaves, converged, transitions int
}

// explore runs every interleaving of e's actions from w, depth actions
// deep, events of them events of the world; it checks every release on the
// way (the world's oracle) and runs every state at the full depth to
// convergence.
func (e exploration) explore(t *testing.T, w *world, depth, events int) explored {
	acts := e.actions()
	var out explored
	best := map[string]int{} // state and events left → most depth left it was explored with
	var path []string
	var walk func(w *world, depth, events int)
	walk = func(w *world, depth, events int) {
		k := w.stateKey() + "|" + strconv.Itoa(events)
		if d, ok := best[k]; ok && d >= depth {
			return
		}
		if _, ok := best[k]; !ok {
			out.states++
		}
		best[k] = depth
		if depth == 0 {
			out.leaves++
			e.converges(t, w, path)
			out.converged++
			return
		}
		for _, a := range acts {
			if a.event && events == 0 {
				continue
			}
			next := w.clone()
			next.logf("explore: %s", a.name)
			path = append(path, a.name)
			a.do(next)
			out.transitions++
			left := events
			if a.event {
				left--
			}
			walk(next, depth-1, left)
			path = path[:len(path)-1]
		}
	}
	walk(w, depth, events)
	return out
}

// converges lets the world run from w, once every pause and every other
// system's gate is lifted, every stuck rollout let become Ready, every render has landed everywhere (the chart's
// apply finishes) and a deleted Backend is created again (frontends wait
// for one, PrerequisiteNotFound), and fails the test if it does not
// settle: a deadlock.
func (e exploration) converges(t *testing.T, w *world, path []string) {
	c := w.clone()
	for range 3 { // the operator finishes deleting what is being deleted
		c.operate()
	}
	// The chart's apply creates a node it renders that is gone, with the
	// render's rollout-id (renders that say which nodes they render).
	for _, k := range e.rendered() {
		if c.nodes[c.name(k)] == nil {
			c.create(k, v1, nil)
			renderLands(c, k, e.pinned, e.rendered())
		}
	}
	if c.nodes[c.name("be")] == nil {
		c.create("be", v1, nil)
	}
	for _, k := range keysOf(e.size) {
		if n := c.nodes[c.name(k)]; n != nil && annotated(n, v2alpha1.AnnotationPauseRollout) {
			c.annotate(k, v2alpha1.AnnotationPauseRollout, "")
		}
		c.liftOtherSystemsGate(k)
	}
	clear(c.stuck) // a rollout held from becoming Ready becomes Ready
	if e.rolloutID {
		newest := ""
		for _, n := range c.nodes {
			if id := n.GetAnnotations()[v2alpha1.AnnotationRolloutID]; len(id) > len(newest) || len(id) == len(newest) && id > newest {
				newest = id
			}
		}
		for _, k := range keysOf(e.size) {
			if n := c.nodes[c.name(k)]; n != nil && n.GetAnnotations()[v2alpha1.AnnotationRolloutID] != newest {
				renderLands(c, k, e.pinned, e.rendered())
			}
		}
		if e.pinned {
			// A kubectl edit of a version left pins that nothing meets
			// (the node waits and says for what): the next render mends
			// them.
			for _, k := range keysOf(e.size) {
				renderLands(c, k, true, e.rendered())
			}
		}
	}
	for range 400 {
		c.step()
		if c.settled() {
			return
		}
	}
	t.Fatalf("%s: no convergence after %s:\n%s\n%s", e.name, strings.Join(path, ", "), strings.Join(c.log, "\n"), c.dump())
}

var explorations = []exploration{
	{name: "3 nodes, default lists", size: 3},
	{name: "3 nodes, default lists, settle time", size: 3, settle: true},
	{name: "3 nodes, default lists, rollout-id", size: 3, rolloutID: true},
	{name: "3 nodes, default lists, rollout-id, settle time", size: 3, rolloutID: true, settle: true},
	{name: "3 nodes, the old chart's lists", size: 3, oldChart: true},
	{name: "4 nodes, default lists", size: 4},
	{name: "4 nodes, the old chart's lists, rollout-id", size: 4, oldChart: true, rolloutID: true},
	{name: "3 nodes, the old chart's pinned lists, rollout-id", size: 3, oldChart: true, rolloutID: true, pinned: true},
	{name: "3 nodes, default lists, be paused with a change", size: 3, heldBackend: true},
	{name: "3 nodes, default lists, be's release overtaken by reverts", size: 3, overtaken: "be"},
	{name: "4 nodes, the old chart's lists, fe3's release overtaken by reverts", size: 4, oldChart: true, overtaken: "fe3"},
	{name: "3 nodes, default lists, fe2's rollout overtaken mid-way and changed back", size: 3, overtakenMidRollout: "fe2"},
	{name: "3 nodes, default lists, nodes deleted and created again over their old workload", size: 3, recreate: true},
	{name: "3 nodes, default lists, rollout-id, fe2 no longer rendered", size: 3, rolloutID: true, dropped: "fe2"},
}

// TestEveryInterleavingOfSmallTenantsKeepsTheOrder explores every
// interleaving of small tenants (explorations) up to explorerBudget: every
// release of a node and of a pod is checked against the oracle, and every
// state at the full depth converges.
func TestEveryInterleavingOfSmallTenantsKeepsTheOrder(t *testing.T) {
	depth, events := explorerBudget(t)
	for _, e := range explorations {
		t.Run(e.name, func(t *testing.T) {
			start := time.Now()
			w := e.setup(t)
			got := e.explore(t, w, depth, events)
			require.Positive(t, got.leaves, "explored something")
			t.Logf("depth %d, %d events: %d states, %d transitions, %d leaves run to convergence, in %s",
				depth, events, got.states, got.transitions, got.converged, time.Since(start).Round(time.Millisecond))
		})
	}
}
