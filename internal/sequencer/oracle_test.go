package sequencer

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

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

func (o *oracle) gated(m string) bool { return len(o.w.nodes[m].NodeSpec().RolloutGates) > 0 }

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
// node released in the same pass is about to roll and is Ready for no one.
func (o *oracle) readyFor(m string, need need) bool {
	if o.releasing[m] {
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

// needs lists what m's list ("provisioning" or "upgrade") asks for; false
// when it names a node that does not exist.
func (o *oracle) needs(m, list string) ([]need, bool) {
	var out []need
	var walk func(m string, seen map[string]bool) bool
	walk = func(m string, seen map[string]bool) bool {
		deps := o.w.nodes[m].NodeSpec().DeploymentDependencies
		var entries []v2alpha1.Prerequisite
		if deps != nil {
			entries = deps.ProvisioningPrerequisites
			if list == "upgrade" {
				entries = deps.UpgradePrerequisites
			}
		}
		record := o.w.nodes[m].GetAnnotations()[v2alpha1.AnnotationDefaultedPrerequisites]
		if entries == nil || strings.Contains(record, list+"Prerequisites") {
			order := o.prov
			if list == "upgrade" {
				order = o.upg
			}
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
			out = append(out, need{p.ExpressNode, p.PodConditionType, p.ConditionStatus, p.ExpressVersion, p.DeploymentRevision, list == "upgrade", list == "upgrade"})
		}
		return true
	}
	ok := walk(m, map[string]bool{m: true})
	return out, ok
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

// upgradeMode: a gated node with a target the sequencer has not released.
func (o *oracle) upgradeMode(m string) bool {
	ann := o.w.nodes[m].GetAnnotations()
	released := ann[v2alpha1.AnnotationReleasedTarget]
	return released != "" && released != ann[v2alpha1.AnnotationTargetHash]
}

// waiting: a live node that cannot move until others do — gated and not
// paused or ignored, or recovering (not Ready, not in a released rollout):
// its new pods wait for its provisioning-predecessors.
func (o *oracle) waiting(m string) bool {
	n := o.w.nodes[m]
	if !o.live(m) || annotated(n, v2alpha1.AnnotationPauseRollout) || annotated(n, v2alpha1.AnnotationIgnorePrerequisites) {
		return false
	}
	if o.gated(m) {
		return true
	}
	return !o.inFlight(m) && !o.allPods(m, func(p Pod) bool { return p.Hash == o.hash(m) && p.Conditions["Ready"] == "True" })
}

// circularNeeds: x's unmet upgrade needs that wait, through waiting nodes
// and at least one provisioning wait, for x. Only those are dropped.
func (o *oracle) circularNeeds(x string) map[string]bool {
	type state struct {
		node string
		prov bool
	}
	first, _ := o.unmet(x, true)
	out := map[string]bool{}
	for _, start := range first {
		if !start.upgrade || out[start.node] {
			continue
		}
		queue := []state{{start.node, false}}
		seen := map[state]bool{}
		for len(queue) > 0 {
			st := queue[0]
			queue = queue[1:]
			if st.node == x {
				if st.prov {
					out[start.node] = true
					break
				}
				continue
			}
			if seen[st] || !o.waiting(st.node) {
				continue
			}
			seen[st] = true
			next, _ := o.unmet(st.node, o.gated(st.node) && o.upgradeMode(st.node))
			for _, nd := range next {
				queue = append(queue, state{nd.node, st.prov || !nd.upgrade})
			}
		}
	}
	return out
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
	o := newOracle(w, releasing)
	o.releasing = without(releasing, name)
	upgrade := o.upgradeMode(name)
	unmet, ok := o.unmetDropping(name)
	if !ok {
		return false, "a prerequisite does not exist"
	}
	if !upgrade && n.NodeKind() == v2alpha1.KindFrontend {
		if _, ok := w.nodes[w.name("be")]; !ok {
			return false, "no Backend"
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
	if len(unmet) == 0 {
		return true, ""
	}
	if o.inFlight(name) {
		all := true
		for _, nd := range unmet {
			all = all && o.reaches(nd.node, name)
		}
		if all {
			return true, "" // every predecessor not Ready may wait for this half-done rollout
		}
	}
	return false, fmt.Sprintf("%s is not Ready for it (%+v; pods %+v; releasing %v)", unmet[0].node, unmet[0], w.pods[unmet[0].node], releasing)
}

// reaches: node from may not become Ready until target does: from waits
// for target, through any live nodes — for a release (a gated node's unmet
// needs, circular upgrade needs dropped) or for its new pods (its unmet
// provisioning needs).
func (o *oracle) reaches(from, target string) bool {
	seen := map[string]bool{}
	queue := []string{from}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur == target {
			return true
		}
		if _, ok := o.w.nodes[cur]; seen[cur] || !ok || !o.live(cur) {
			continue
		}
		seen[cur] = true
		var next []need
		if o.gated(cur) { // paused or not: let go, it waits for these
			next, _ = o.unmetDropping(cur)
		}
		pods, _ := o.unmet(cur, false)
		for _, nd := range append(next, pods...) {
			queue = append(queue, nd.node)
		}
	}
	return false
}

// inFlight: released for its current target, and not recorded converged
// since: no condition observed at or after the release's generation says
// RolloutComplete, or a state reached only from there.
func (o *oracle) inFlight(m string) bool {
	n := o.w.nodes[m]
	ann := n.GetAnnotations()
	if o.gated(m) || ann[v2alpha1.AnnotationReleasedTarget] != o.hash(m) {
		return false
	}
	if o.allPods(m, func(p Pod) bool { return p.Hash == o.hash(m) && p.Conditions["Ready"] == "True" }) {
		return false
	}
	gen, _ := strconv.ParseInt(ann[v2alpha1.AnnotationReleasedGeneration], 10, 64)
	for _, other := range o.w.nodes {
		var after map[string]string
		_ = json.Unmarshal([]byte(other.GetAnnotations()[v2alpha1.AnnotationReleasedAfter]), &after)
		if after[m] == fmt.Sprintf("%s/%d", n.GetUID(), gen) {
			return false // a release that relied on it recorded it converged
		}
	}
	for _, c := range n.NodeStatus().Conditions {
		if c.Type == v2alpha1.ConditionPrerequisitesReady && c.ObservedGeneration >= gen {
			switch c.Reason {
			case "RolloutComplete", "Recovering", "WaitingForPrerequisite", "DependencyCycle":
				return false
			}
		}
	}
	return true
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
