package sequencer

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// independentRequirementsHold re-derives, without the planner's code, whether
// node name may be released now under the built-in orders (DESIGN.md §3–§4).
// The property test holds every release the planner makes against it.
func independentRequirementsHold(w *world, name string) (bool, string) {
	n := w.nodes[name]
	if n.GetAnnotations()[v2alpha1.AnnotationIgnorePrerequisites] == "true" {
		return true, ""
	}
	allPods := func(m string, f func(Pod) bool) bool {
		if len(w.pods[m]) == 0 {
			return false
		}
		for _, p := range w.pods[m] {
			if !f(p) {
				return false
			}
		}
		return true
	}
	ready := func(m string) bool {
		return allPods(m, func(p Pod) bool { return p.Conditions["Ready"] == "True" })
	}
	up := func(m string) bool { return w.nodes[m].NodeSpec().Up == nil || *w.nodes[m].NodeSpec().Up }

	// The built-in orders, written out: provisioning be, fe1, fe2, …;
	// upgrade fe1, fe2, be, fe3, …
	var fes []int
	hasBE := false
	for m := range w.nodes {
		key := strings.TrimPrefix(m, w.cluster+"-")
		if key == "be" {
			hasBE = true
		} else if i, err := strconv.Atoi(strings.TrimPrefix(key, "fe")); err == nil {
			fes = append(fes, i)
		}
	}
	sort.Ints(fes)
	var prov, upg []string
	if hasBE {
		prov = append(prov, w.name("be"))
	}
	for _, i := range fes {
		prov = append(prov, w.name(fmt.Sprintf("fe%d", i)))
		if i <= 2 {
			upg = append(upg, w.name(fmt.Sprintf("fe%d", i)))
		}
	}
	if hasBE {
		upg = append(upg, w.name("be"))
	}
	for _, i := range fes {
		if i > 2 {
			upg = append(upg, w.name(fmt.Sprintf("fe%d", i)))
		}
	}

	type need struct {
		node              string
		condType, status  string
		version, revision string
		onTarget          bool
	}
	var needs []need
	var walk func(m string, list string, onTarget bool, seen map[string]bool) bool
	walk = func(m string, list string, onTarget bool, seen map[string]bool) bool {
		deps := w.nodes[m].NodeSpec().DeploymentDependencies
		var entries []v2alpha1.Prerequisite
		if deps != nil {
			entries = deps.ProvisioningPrerequisites
			if list == "upgrade" {
				entries = deps.UpgradePrerequisites
			}
		}
		record := w.nodes[m].GetAnnotations()[v2alpha1.AnnotationDefaultedPrerequisites]
		if entries == nil || strings.Contains(record, list+"Prerequisites") {
			order := prov
			if list == "upgrade" {
				order = upg
			}
			for _, o := range order {
				if o == m {
					break
				}
				if up(o) {
					needs = append(needs, need{node: o, condType: "Ready", status: "True", onTarget: onTarget})
				}
			}
			return true
		}
		for _, p := range entries {
			if seen[p.ExpressNode] {
				continue
			}
			if _, ok := w.nodes[p.ExpressNode]; !ok {
				return false
			}
			if !up(p.ExpressNode) {
				seen[p.ExpressNode] = true
				if !walk(p.ExpressNode, list, onTarget, seen) {
					return false
				}
				continue
			}
			needs = append(needs, need{p.ExpressNode, p.PodConditionType, p.ConditionStatus, p.ExpressVersion, p.DeploymentRevision, onTarget})
		}
		return true
	}
	provisioning := !ready(name)
	if provisioning && n.NodeKind() == v2alpha1.KindFrontend && !hasBE {
		return false, "no Backend"
	}
	if !walk(name, "provisioning", false, map[string]bool{name: true}) {
		return false, "a provisioning prerequisite does not exist"
	}
	if !provisioning && !walk(name, "upgrade", true, map[string]bool{name: true}) {
		return false, "an upgrade prerequisite does not exist"
	}
	for _, nd := range needs {
		dep := w.nodes[nd.node].NodeSpec()
		version, revision := nd.version, nd.revision
		if nd.onTarget {
			if version == "" {
				version = dep.ExpressVersion
			}
			if revision == "" {
				revision = dep.DeploymentRevision
			}
			if len(dep.RolloutGates) > 0 {
				return false, nd.node + " is gated"
			}
		}
		if !allPods(nd.node, func(p Pod) bool {
			return p.Conditions[nd.condType] == nd.status && (version == "" || p.Version == version) && (revision == "" || p.Revision == revision)
		}) {
			return false, fmt.Sprintf("%s is not %s=%s on %q/%q", nd.node, nd.condType, nd.status, version, revision)
		}
	}
	return true, ""
}
