package rollout

import (
	"fmt"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// sharedNames returns the names of nodes (the tenant's) that a Backend and
// a Frontend of all (the namespace's nodes) share, nil when none is.
func sharedNames(all []v2alpha1.Node, nodes map[string]v2alpha1.Node) map[string]bool {
	kinds := map[string]string{}
	var out map[string]bool
	for _, n := range all {
		name := n.GetName()
		if _, ours := nodes[name]; !ours {
			continue
		}
		switch k, seen := kinds[name]; {
		case !seen:
			kinds[name] = n.NodeKind()
		case k != n.NodeKind():
			if out == nil {
				out = map[string]bool{}
			}
			out[name] = true
		}
	}
	return out
}

// sharedNameBlocker is why no pod of node name may start while a Backend
// and a Frontend of the namespace share its name.
func sharedNameBlocker(name string) blocker {
	return blocker{node: name, reason: v2alpha1.ReasonNameShared, message: fmt.Sprintf(
		"a Backend and a Frontend of the namespace are both called %s: pods name their node by name alone (label %s), so none can be told to be this node's; its new pods are held and it reads as not Ready until one of the two is renamed or deleted",
		name, v2alpha1.LabelNode)}
}
