package rollout

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// The oracle re-derives, without the planner's code, whether a node may be
// released, or its pods may schedule, under the built-in orders (DESIGN v2
// §3–§4b). It reads the simulated world's truth: what the operator is
// rolling, which pods carry which target. The property test holds every
// release the planner makes against it.

type need struct {
	node              string
	condType, status  string
	version, revision string
	onTarget          bool
	upgrade           bool
}

type oracle struct {
	w         *world
	releasing map[string]bool
	prov, upg []string
}

func newOracle(w *world, releasing map[string]bool) *oracle {
	o := &oracle{w: w, releasing: releasing}
	// The built-in orders, written out: provisioning be, fe1, fe2, …;
	// upgrade fe1, fe2, be, fe3, …
	var fes []int
	hasBE := false
	for m := range w.nodes {
		key := w.key(m)
		if key == "be" {
			hasBE = true
		} else if i, err := strconv.Atoi(strings.TrimPrefix(key, "fe")); err == nil {
			fes = append(fes, i)
		}
	}
	sort.Ints(fes)
	if hasBE {
		o.prov = append(o.prov, w.name("be"))
	}
	for _, i := range fes {
		o.prov = append(o.prov, w.name(fmt.Sprintf("fe%d", i)))
		if i <= 2 {
			o.upg = append(o.upg, w.name(fmt.Sprintf("fe%d", i)))
		}
	}
	if hasBE {
		o.upg = append(o.upg, w.name("be"))
	}
	for _, i := range fes {
		if i > 2 {
			o.upg = append(o.upg, w.name(fmt.Sprintf("fe%d", i)))
		}
	}
	return o
}

func (o *oracle) live(m string) bool {
	n := o.w.nodes[m]
	return (n.NodeSpec().Up == nil || *n.NodeSpec().Up) && n.GetDeletionTimestamp() == nil
}

// gated: m carries the sequencer's gate (another system's gate holds the
// operator, not the order: a node Ready on its target stays so under it).
func (o *oracle) gated(m string) bool { return o.w.nodes[m].NodeSpec().HasGate(v2alpha1.GateSequencer) }

func (o *oracle) allPods(m string, f func(Pod) bool) bool {
	if len(o.w.pods[m]) == 0 {
		return false
	}
	for _, p := range o.w.pods[m] {
		if !f(p) {
			return false
		}
	}
	return true
}

func (o *oracle) hash(m string) string {
	return o.w.nodes[m].GetAnnotations()[v2alpha1.AnnotationTargetHash]
}

// readyFor: Ready, and — once released — Ready on the released target; a
// node released in the same pass is about to roll and is Ready for no one,
// and so is a node short of a pod its StatefulSet wants (one lost, or a
// scale-up not yet acted on): its Ready pods are not the whole node.
func (o *oracle) readyFor(m string, need need) bool {
	if o.releasing[m] || o.w.missing[m] > 0 || o.w.scaling[m] > 0 {
		return false
	}
	if !o.gated(m) && !o.allPods(m, func(p Pod) bool { return p.Hash == o.hash(m) }) {
		return false // released and not rolled yet, or rolling
	}
	return o.allPods(m, func(p Pod) bool {
		return p.Conditions[need.condType] == need.status &&
			(need.version == "" || p.Version == need.version) && (need.revision == "" || p.Revision == need.revision) &&
			(!need.onTarget || p.Hash == o.hash(m))
	}) && (!need.onTarget || !o.gated(m))
}

// listOf returns m's list ("provisioning" or "upgrade"): its explicit
// entries, or — builtin — the built-in order it follows.
func (o *oracle) listOf(m, list string) (entries []v2alpha1.Prerequisite, order []string, builtin bool) {
	n := o.w.nodes[m]
	if deps := n.NodeSpec().DeploymentDependencies; deps != nil {
		entries = deps.ProvisioningPrerequisites
		if list == "upgrade" {
			entries = deps.UpgradePrerequisites
		}
	}
	if entries != nil && !strings.Contains(n.GetAnnotations()[v2alpha1.AnnotationDefaultedPrerequisites], list+"Prerequisites") {
		return entries, nil, false
	}
	if list == "upgrade" {
		return nil, o.upg, true
	}
	return nil, o.prov, true
}

// needs lists what m's list ("provisioning" or "upgrade") asks for; false
// when it names a node that does not exist.
func (o *oracle) needs(m, list string) ([]need, bool) {
	var out []need
	var walk func(m string, seen map[string]bool) bool
	walk = func(m string, seen map[string]bool) bool {
		entries, order, builtin := o.listOf(m, list)
		if builtin {
			for _, x := range order {
				if x == m {
					break
				}
				if o.live(x) {
					out = append(out, need{node: x, condType: "Ready", status: "True", onTarget: list == "upgrade", upgrade: list == "upgrade"})
				}
			}
			return true
		}
		for _, p := range entries {
			if seen[p.ExpressNode] {
				continue
			}
			if _, ok := o.w.nodes[p.ExpressNode]; !ok {
				return false
			}
			if !o.live(p.ExpressNode) {
				seen[p.ExpressNode] = true
				if !walk(p.ExpressNode, seen) {
					return false
				}
				continue
			}
			// An entry stored without them asks what the CRD's defaults say.
			out = append(out, need{p.ExpressNode, cmp.Or(p.PodConditionType, "Ready"), cmp.Or(p.ConditionStatus, "True"), p.ExpressVersion, p.DeploymentRevision, list == "upgrade", list == "upgrade"})
		}
		return true
	}
	ok := walk(m, map[string]bool{m: true})
	return out, ok
}

// genuineLoop reads the loop a DependencyCycle message names ("a → b
// (down) → … → a wait for each other …") and reports whether each of its
// steps is a wait of the node's lists, provisioning or upgrade, as the
// world has them (listsReach), and each node marked down is.
func (o *oracle) genuineLoop(message string) bool {
	path, _, ok := strings.Cut(message, " wait for each other")
	if !ok {
		return false
	}
	if _, after, recovering := strings.Cut(path, "; "); recovering {
		path = after
	}
	hops := strings.Split(path, " → ")
	for i, h := range hops {
		name, down := strings.CutSuffix(h, " (down)")
		if _, exists := o.w.nodes[name]; !exists || down == o.live(name) {
			return false
		}
		hops[i] = name
	}
	if len(hops) < 2 || hops[0] != hops[len(hops)-1] {
		return false
	}
	for i := range len(hops) - 1 {
		if !o.listsReach(hops[i], hops[i+1]) {
			return false
		}
	}
	return true
}

// listsReach reports whether m's lists lead to x: an entry of an explicit
// list names it, or a defaulted list has it before m in the order and
// live, or either names a down node whose own lists lead to it (a walk
// through a node that is down).
func (o *oracle) listsReach(m, x string) bool {
	seen := map[string]bool{}
	var reach func(m string) bool
	reach = func(m string) bool {
		seen[m] = true
		for _, list := range []string{"provisioning", "upgrade"} {
			entries, order, builtin := o.listOf(m, list)
			var named []string
			if builtin {
				named = order[:max(0, slices.Index(order, m))]
			}
			for _, p := range entries {
				named = append(named, p.ExpressNode)
			}
			for _, y := range named {
				_, exists := o.w.nodes[y]
				switch {
				case !exists || builtin && !o.live(y):
					// An absent node leads nowhere; a defaulted list
					// leaves out the nodes that are down.
				case y == x:
					return true
				case !o.live(y) && !seen[y] && reach(y):
					return true
				}
			}
		}
		return false
	}
	return reach(m)
}

// unmet returns the needs of m that do not hold now.
func (o *oracle) unmet(m string, upgrade bool) ([]need, bool) {
	needs, ok := o.needs(m, "provisioning")
	if upgrade {
		more, ok2 := o.needs(m, "upgrade")
		needs, ok = append(needs, more...), ok && ok2
	}
	var out []need
	for _, nd := range needs {
		if !o.readyFor(nd.node, nd) {
			out = append(out, nd)
		}
	}
	return out, ok
}

// upgradeMode: a gated node released before, whose target the sequencer
// has not released, or — by the world's truth — whose operator last made
// its pods for another target (a release overtaken before it was carried
// out: releasing the node now upgrades it).
func (o *oracle) upgradeMode(m string) bool {
	ann := o.w.nodes[m].GetAnnotations()
	released, target := ann[v2alpha1.AnnotationReleasedTarget], ann[v2alpha1.AnnotationTargetHash]
	return released != "" && (released != target || o.w.lastHash[m] != "" && o.w.lastHash[m] != target)
}

// needsReleaseToBeReady: the world's truth (not the pods' looks) that a
// gated m's readiness waits for its release: it crashed (the operator
// re-provisions only once it is let go) or has no pod and no StatefulSet
// creating one. A blip, a rollout or a StatefulSet still creating a pod
// ends by itself.
func (o *oracle) needsReleaseToBeReady(m string) bool {
	return o.w.crashed[m] > 0 || len(o.w.pods[m]) == 0 && o.w.scaling[m] == 0 && o.w.missing[m] == 0
}

// podHeldForRelease: a pod of m held by the sequencer's scheduling gate is
// made for a target m is not released for that it starts only with m's
// release, whatever the pod rule says: its current target; or the one its
// StatefulSet's template carries (the world makes every pod from it),
// unless that StatefulSet's spec is as it was when m's latest release read
// it — the world's own count of its changes, template, replicas or
// scale-ups — so that the template makes what m ran then, a release never
// acted on, and the pod is a recovery; or one its rollout-history does not
// name.
func (o *oracle) podHeldForRelease(m string) bool {
	released := o.w.nodes[m].GetAnnotations()[v2alpha1.AnnotationReleasedTarget]
	history := HistoryIn(o.w.nodes[m])
	unmoved := released != "" && o.w.genAtRelease[m] > 0 && o.w.genAtRelease[m] == o.w.setGen[m]
	return slices.ContainsFunc(o.w.pods[m], func(p Pod) bool {
		switch {
		case !p.HeldBySequencer() || p.Hash == released:
			return false
		case p.Hash == o.hash(m):
			return true
		case p.Hash == o.w.lastHash[m]:
			return !unmoved
		}
		return !slices.ContainsFunc(history, func(r RolloutRecord) bool { return r.Target == p.Hash })
	})
}

// podRuleDecides: m's readiness waits for pods the pod rule decides on:
// pods held now, a pod its StatefulSet still creates, or — m not gated —
// pods the operator creates next (crashed, none, not on target).
func (o *oracle) podRuleDecides(m string) bool {
	if o.w.missing[m] > 0 || o.w.scaling[m] > 0 || slices.ContainsFunc(o.w.pods[m], Pod.HeldBySequencer) {
		return true
	}
	if o.gated(m) {
		return false
	}
	return o.w.crashed[m] > 0 || !o.allPods(m, func(p Pod) bool { return p.Hash == o.hash(m) })
}

// readinessOf is the state an unmet need waits for: "target" for an
// upgrade need, "pinned" for one that pins a version or revision its
// node's pods do not all run (only its rollout gets it there), "ready"
// otherwise.
func (o *oracle) readinessOf(nd need) string {
	switch {
	case nd.upgrade:
		return "target"
	case nd.version != "" || nd.revision != "":
		pods := o.w.pods[nd.node]
		if len(pods) == 0 || slices.ContainsFunc(pods, func(p Pod) bool {
			return nd.version != "" && p.Version != nd.version || nd.revision != "" && p.Revision != nd.revision
		}) {
			spec := o.w.nodes[nd.node].NodeSpec()
			if (nd.version == "" || nd.version == spec.ExpressVersion) && (nd.revision == "" || nd.revision == spec.DeploymentRevision) {
				return "pinned"
			}
			return "never" // a pin its own target does not carry: no rollout of it meets it
		}
	}
	return "ready"
}

// waitsFor lists the states the state (m, what) waits for — what is
// "release", "pods", "ready", "pinned" or "target" — read from the world's truth. A
// paused node waits as if let go. With rollingPods, a node's held pods wait
// for its predecessors even while its rollout is under way (what it may yet
// wait for); without, they do not (they are let go where that is circular).
func (o *oracle) waitsFor(m, what string, rollingPods bool) [][2]string {
	n, ok := o.w.nodes[m]
	if !ok || !o.live(m) || annotated(n, v2alpha1.AnnotationIgnorePrerequisites) {
		return nil
	}
	var out [][2]string
	switch what {
	case "release":
		if !o.gated(m) {
			return nil
		}
		unmet, _ := o.unmet(m, o.upgradeMode(m))
		for _, nd := range unmet {
			out = append(out, [2]string{nd.node, o.readinessOf(nd)})
		}
	case "pods":
		if !rollingPods && o.inFlight(m) {
			return nil
		}
		unmet, _ := o.unmet(m, false)
		for _, nd := range unmet {
			out = append(out, [2]string{nd.node, o.readinessOf(nd)})
		}
	case "ready":
		if o.gated(m) && (o.needsReleaseToBeReady(m) || o.podHeldForRelease(m)) {
			out = append(out, [2]string{m, "release"})
		}
		if o.podRuleDecides(m) {
			out = append(out, [2]string{m, "pods"})
		}
	case "pinned": // Ready on a version its pods do not run: only its rollout gets it there
		out = append(out, [2]string{m, "target"})
	case "target":
		if o.gated(m) {
			out = append(out, [2]string{m, "release"})
		} else {
			out = append(out, [2]string{m, "ready"})
		}
	}
	return out
}

// provisionedAfter: y's provisioning needs x Ready, directly or through
// others (the oracle's own walk of the lists).
func (o *oracle) provisionedAfter(y, x string) bool {
	seen := map[string]bool{y: true}
	queue := []string{y}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if _, ok := o.w.nodes[cur]; !ok {
			continue
		}
		needs, _ := o.needs(cur, "provisioning")
		for _, nd := range needs {
			if nd.node == x {
				return true
			}
			if !seen[nd.node] {
				seen[nd.node] = true
				queue = append(queue, nd.node)
			}
		}
	}
	return false
}

// circularNeeds: x's unmet upgrade needs that the plan dropped as
// circular and that are so by the oracle's own reading: each does not
// follow the provisioning order (x does not need the node for its own
// provisioning) and lies on a loop back to x's release that passes no
// state twice, waits for readiness somewhere, and runs through no other
// upgrade wait the plan dropped — a loop through a wait dropped anyway is
// no reason to drop x's. The plan's drops (Decision.CircularWaits) are
// its certificate; the loops are found by enumerating paths over the
// world's truth, with none of the planner's search.
func (o *oracle) circularNeeds(x string) map[string]bool {
	first, _ := o.unmet(x, true)
	out := map[string]bool{}
	home := [2]string{x, "release"}
	for _, start := range first {
		if !start.upgrade || out[start.node] || o.provisionedAfter(x, start.node) || !slices.Contains(o.w.circular[x], start.node) {
			continue
		}
		o.simplePaths([2]string{start.node, "target"}, home, nil, func(path [][2]string) bool {
			if !slices.ContainsFunc(path, isReadiness) {
				return false
			}
			for i := 0; i+1 < len(path); i++ {
				u, v := path[i], path[i+1]
				if u[1] == "release" && v[1] == "target" && slices.Contains(o.w.circular[u[0]], v[0]) {
					return false // a wait dropped too
				}
			}
			out[start.node] = true
			return true
		})
	}
	return out
}

func isReadiness(st [2]string) bool { return st[1] == "ready" || st[1] == "pinned" }

// simplePaths calls visit with each path from "from" to "to" that passes
// no state twice and none of avoid, until visit returns true.
func (o *oracle) simplePaths(from, to [2]string, avoid map[[2]string]bool, visit func([][2]string) bool) {
	on := map[[2]string]bool{}
	var path [][2]string
	var walk func(st [2]string) bool
	walk = func(st [2]string) bool {
		if on[st] || avoid[st] {
			return false
		}
		path = append(path, st)
		defer func() { path = path[:len(path)-1] }()
		if st == to {
			return visit(slices.Clone(path))
		}
		on[st] = true
		defer delete(on, st)
		for _, next := range o.waitsFor(st[0], st[1], false) {
			if walk(next) {
				return true
			}
		}
		return false
	}
	walk(from)
}

// unmetDropping: what m waits for now: its provisioning needs and, gated
// for an upgrade, its upgrade needs but the circular ones.
func (o *oracle) unmetDropping(m string) ([]need, bool) {
	if !o.gated(m) || !o.upgradeMode(m) {
		return o.unmet(m, false)
	}
	all, ok := o.unmet(m, true)
	drop := o.circularNeeds(m)
	var out []need
	for _, nd := range all {
		if nd.upgrade && drop[nd.node] {
			continue
		}
		out = append(out, nd)
	}
	return out, ok
}

// independentRequirementsHold: may node name be released now?
func independentRequirementsHold(w *world, name string, releasing map[string]bool) (bool, string) {
	n := w.nodes[name]
	if annotated(n, v2alpha1.AnnotationIgnorePrerequisites) {
		return true, ""
	}
	if annotated(n, v2alpha1.AnnotationPauseRollout) {
		return false, "it is paused (pause-rollout)"
	}
	o := newOracle(w, releasing)
	if why := o.stillLanding(name); why != "" {
		return false, why
	}
	o.releasing = without(releasing, name)
	unmet, ok := o.unmetDropping(name)
	if !ok {
		return false, "a prerequisite does not exist"
	}
	if n.NodeKind() == v2alpha1.KindFrontend {
		if be, ok := w.nodes[w.name("be")]; !ok || be.GetDeletionTimestamp() != nil {
			return false, "no Backend, or one being deleted"
		}
	}
	if len(unmet) > 0 {
		return false, fmt.Sprintf("%s is not %s=%s (on target: %v, upgrade: %v)", unmet[0].node, unmet[0].condType, unmet[0].status, unmet[0].onTarget, unmet[0].upgrade)
	}
	return true, ""
}

// podsMayStartOracle: may the held pods of node name schedule now? Only when
// its live provisioning-predecessors are Ready, unless the node is not live,
// ignored, or released in this pass — or it is in a released rollout and
// one of the predecessors it would wait for waits, through waiting nodes,
// for it (holding it would hold both forever).
func podsMayStartOracle(w *world, name string, releasing map[string]bool) (bool, string) {
	n := w.nodes[name]
	o := newOracle(w, releasing)
	if !o.live(name) || annotated(n, v2alpha1.AnnotationIgnorePrerequisites) || releasing[name] {
		return true, ""
	}
	unmet, ok := o.unmet(name, false)
	if !ok {
		return false, "a provisioning prerequisite does not exist"
	}
	if be, ok := w.nodes[w.name("be")]; n.NodeKind() == v2alpha1.KindFrontend && (!ok || be.GetDeletionTimestamp() != nil) {
		return false, "its tenant has no Backend, or one being deleted"
	}
	if len(unmet) == 0 {
		return true, ""
	}
	if o.inFlight(name) {
		all := true
		for _, nd := range unmet {
			all = all && o.reachesFrom([2]string{nd.node, o.readinessOf(nd)}, name)
		}
		if all {
			return true, "" // every predecessor not Ready may wait for this half-done rollout
		}
	}
	return false, fmt.Sprintf("%s is not Ready for it (%+v; pods %+v; releasing %v)", unmet[0].node, unmet[0], w.pods[unmet[0].node], releasing)
}

// reaches: node from may not become Ready until target does: its
// readiness waits, through any states of live nodes (a paused node as if
// let go), for a state of target.
func (o *oracle) reaches(from, target string) bool {
	return o.reachesFrom([2]string{from, "ready"}, target)
}

func (o *oracle) reachesFrom(from [2]string, target string) bool {
	seen := map[[2]string]bool{}
	queue := [][2]string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur[0] == target {
			return true
		}
		if seen[cur] {
			continue
		}
		seen[cur] = true
		queue = append(queue, o.waitsFor(cur[0], cur[1], true)...)
	}
	return false
}

// inFlight: released for its current target, and not converged since
// where anything could know it: every pod Ready on it at once, found so by
// a pass of the sequencer or kept by the StatefulSet (the world's truth,
// not the sequencer's records of it).
func (o *oracle) inFlight(m string) bool {
	n := o.w.nodes[m]
	ann := n.GetAnnotations()
	if o.gated(m) || ann[v2alpha1.AnnotationReleasedTarget] != o.hash(m) {
		return false
	}
	if o.allPods(m, func(p Pod) bool { return p.Hash == o.hash(m) && p.Conditions["Ready"] == "True" }) {
		return false
	}
	if o.w.convergedSince[m] == o.hash(m) {
		return false // every pod was Ready on this target at once since its release, and its StatefulSet keeps it
	}
	return o.w.seenConverged[m] != o.hash(m) // else a pass of the sequencer found it so
}

func without(m map[string]bool, key string) map[string]bool {
	out := map[string]bool{}
	for k, v := range m {
		if k != key {
			out[k] = v
		}
	}
	return out
}

// stillLanding says why gated node m may not be released while a change
// lands node by node (DESIGN §4, "as if applied at once"). On a tenant
// without rollout-id, while it settles (stillSettling). With it: the
// tenant's nodes — those not being deleted, and of the nodes
// intentionally down only those that carry an id — do not all carry the same
// rollout-id, and the landing timeout, counted from the newest id's latest
// stamp, has not passed. The one release a landing lets through is a
// recovery: a node that cannot become Ready without its release, once it
// and every node the landing could still put before it have landed
// (landedBefore). Once the ids agree, or the timeout has passed, changes
// that came without a new id settle (stillSettling). "" when nothing holds m.
func (o *oracle) stillLanding(m string) string {
	ids, newest, timedOut := o.landing()
	if newest == "" {
		return o.stillSettling(func(v2alpha1.Node) bool { return true })
	}
	if (len(ids) >= 2 || !ids[newest]) && !timedOut {
		if o.needsReleaseToBeReady(m) && o.landedBefore(m, newest) {
			return ""
		}
		return fmt.Sprintf("rollout-id %s is still landing: the nodes carry %v", newest, slices.Sorted(maps.Keys(ids)))
	}
	// rollout-id cannot say whether a change that came without a new one
	// (a kubectl edit; a render of the id alone after a change) has landed:
	// such changes settle as on a tenant without rollout-id.
	return o.stillSettling(func(n v2alpha1.Node) bool { return o.w.changedWithoutNewID(n.GetName()) })
}

// landing returns the rollout-ids the tenant's nodes carry — of the nodes
// not being deleted, of those intentionally down only those that carry an
// id; when the world knows which nodes the render applied last renders,
// those and only those, created or not, up or not — the newest of them,
// and whether the landing timeout, counted from the newest id's latest
// stamp, has passed.
func (o *oracle) landing() (ids map[string]bool, newest string, timedOut bool) {
	newest, newestAt := o.newestID(func(n v2alpha1.Node) bool { _, ok := o.countsForLanding(n); return ok })
	// A render applied first to a node being deleted has begun to land:
	// the nodes that count lack its id until it reaches them.
	deleting, deletingAt := o.newestID(func(n v2alpha1.Node) bool { return n.GetDeletionTimestamp() != nil })
	if newest != "" && deleting != "" && deleting != newest && deletingAt.After(newestAt) {
		newest, newestAt = deleting, deletingAt
	}
	// The render the user applied last, by the world's record, is the
	// change landing: a node it does not render is no part of it; one it
	// renders is, created or not, up or not.
	rendered, known := o.w.renders[o.renderInEffect()]
	ids = map[string]bool{}
	for name, n := range o.w.nodes {
		id, ok := o.countsForLanding(n)
		switch {
		case known && !slices.Contains(rendered, name):
		case ok, known && n.GetDeletionTimestamp() == nil:
			ids[id] = true
		}
	}
	for _, name := range rendered {
		if _, exists := o.w.nodes[name]; known && !exists {
			ids["(a node the render creates)"] = true
		}
	}
	timedOut = o.w.grouping.LandingTimeout > 0 && !o.w.now.Before(newestAt.Add(o.w.grouping.LandingTimeout))
	return ids, newest, timedOut
}

// newestID returns the rollout-id that the world's nodes of which counts
// says so took last (by their stamps; ties to the greater id), and when.
func (o *oracle) newestID(counts func(v2alpha1.Node) bool) (newest string, newestAt time.Time) {
	for _, n := range o.w.nodes {
		id := n.GetAnnotations()[v2alpha1.AnnotationRolloutID]
		if id == "" || !counts(n) {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, n.GetAnnotations()[v2alpha1.AnnotationRolloutIDChangedAt])
		if newest == "" || at.After(newestAt) || at.Equal(newestAt) && id > newest {
			newest, newestAt = id, at
		}
	}
	return newest, newestAt
}

// renderInEffect returns the rollout-id of the render the user applied
// last of those some node of the tenant still carries, being deleted or
// not. A render that landed only on nodes gone since has left nothing in
// the tenant: no sequencer can see it, and its change begins, as if
// applied at once, where it next lands.
func (o *oracle) renderInEffect() string {
	carried := map[string]bool{}
	for _, n := range o.w.nodes {
		carried[n.GetAnnotations()[v2alpha1.AnnotationRolloutID]] = true
	}
	for _, id := range slices.Backward(o.w.renderOrder) {
		if carried[id] {
			return id
		}
	}
	return ""
}

// countsForLanding returns the rollout-id node n carries and whether it
// counts for a landing: not being deleted, and up or carrying an id.
func (o *oracle) countsForLanding(n v2alpha1.Node) (string, bool) {
	id := n.GetAnnotations()[v2alpha1.AnnotationRolloutID]
	return id, n.GetDeletionTimestamp() == nil && (n.NodeSpec().IsUp() || id != "")
}

// landingHolds: the tenant's nodes that count disagree on rollout-id and
// the landing timeout has not passed.
func (o *oracle) landingHolds() bool {
	ids, newest, timedOut := o.landing()
	return newest != "" && (len(ids) >= 2 || !ids[newest]) && !timedOut
}

// landedBefore: m and every node that the change still landing could put
// before m carry the newest id — every node that could be one of m's
// upgrade or provisioning prerequisites (a render may bring a down one
// back up, or take an up one down and make m wait for what it names).
func (o *oracle) landedBefore(m, newest string) bool {
	landed := func(y string) bool {
		n, ok := o.w.nodes[y]
		return ok && n.GetAnnotations()[v2alpha1.AnnotationRolloutID] == newest
	}
	if !landed(m) {
		return false
	}
	if !o.upgradeMode(m) {
		for _, y := range o.couldNeed(m, "provisioning") {
			if n, ok := o.w.nodes[y]; ok && n.GetDeletionTimestamp() == nil && !landed(y) {
				return false
			}
		}
		return true
	}
	for _, y := range o.couldNeed(m, "upgrade") {
		if !landed(y) {
			return false
		}
	}
	for _, y := range o.couldNeed(m, "provisioning") {
		if n, ok := o.w.nodes[y]; ok && n.GetDeletionTimestamp() == nil && !landed(y) {
			return false
		}
	}
	// So are the lists through which m's upgrade prerequisites need m for
	// their provisioning: they are what makes m's wait on them circular.
	for _, y := range o.couldNeed(m, "upgrade") {
		if !o.live(y) {
			continue
		}
		for _, z := range o.couldNeed(y, "provisioning") {
			if n, ok := o.w.nodes[z]; ok && n.GetDeletionTimestamp() == nil && !landed(z) {
				return false
			}
		}
	}
	return true
}

// couldNeed lists the nodes that could be in m's list ("provisioning" or
// "upgrade") whoever is up: for a built-in list every node before m in the
// built-in order, for an explicit one the nodes it names; and, through those
// that are down, what they could need in turn. Nodes being deleted need no
// one and are needed by no one.
func (o *oracle) couldNeed(m, list string) []string {
	var out []string
	seen := map[string]bool{m: true}
	var walk func(m string)
	walk = func(m string) {
		var next []string
		entries, order, builtin := o.listOf(m, list)
		if builtin {
			for _, x := range order {
				if x == m {
					break
				}
				if o.w.nodes[x].GetDeletionTimestamp() == nil {
					next = append(next, x)
				}
			}
		} else {
			for _, p := range entries {
				next = append(next, p.ExpressNode)
			}
		}
		for _, y := range next {
			if seen[y] {
				continue
			}
			seen[y] = true
			out = append(out, y)
			if _, ok := o.w.nodes[y]; ok && !o.live(y) {
				walk(y)
			}
		}
	}
	walk(m)
	return out
}

// stillSettling says why no gated node of a tenant without rollout-id may be
// released yet (DESIGN §4): a node's latest change, of its target or its
// order, is less than the
// settle time old, and its run of changes began less than the settle cap
// ago. Recovery waits for it too. On a tenant with rollout-id, only the
// nodes counted (whose change came without a new id) hold it. "" when
// nothing holds the tenant.
func (o *oracle) stillSettling(counted func(v2alpha1.Node) bool) string {
	g := o.w.grouping
	if g.SettleTime <= 0 {
		return ""
	}
	// A node that left the tenant is the tenant's change, whatever the
	// rollout-id (a deletion carries none), capped by no run.
	if left := o.w.nodeLeftAt; !left.IsZero() && o.w.now.Before(left.Add(g.SettleTime)) {
		return fmt.Sprintf("a node left the tenant at %s: it settles until %s", left.Format(time.TimeOnly), left.Add(g.SettleTime).Format(time.TimeOnly))
	}
	for name, n := range o.w.nodes {
		// The node's latest change: of its target or its order, as the
		// world made it, or as the webhook dated it, whichever is later.
		last := o.w.targetWrite[name].at
		for _, key := range []string{v2alpha1.AnnotationTargetChangedAt, v2alpha1.AnnotationOrderChangedAt} {
			if at, err := time.Parse(time.RFC3339Nano, n.GetAnnotations()[key]); err == nil && at.After(last) {
				last = at
			}
		}
		if last.IsZero() || !counted(n) {
			continue
		}
		until := last.Add(g.SettleTime)
		if began, err := time.Parse(time.RFC3339Nano, n.GetAnnotations()[v2alpha1.AnnotationTargetChangesBeganAt]); err == nil && g.SettleCap > 0 && began.Add(g.SettleCap).Before(until) {
			until = began.Add(g.SettleCap)
		}
		if o.w.now.Before(until) {
			return fmt.Sprintf("%s changed at %s: the tenant settles until %s", name, last.Format(time.TimeOnly), until.Format(time.TimeOnly))
		}
	}
	return ""
}
