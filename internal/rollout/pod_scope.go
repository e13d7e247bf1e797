package rollout

import (
	"maps"
	"slices"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// This file says what the pod webhook's answer that a pod may start rests
// on, so that it can be read by name. Unlike a release, whose judgement
// rests on the whole tenant (the newest rollout-id of any node, a render
// landing, the wait-for graph), new pods of a node may start without more
// than its live provisioning predecessors Ready: the node itself, every
// node its provisioning list can name (for a defaulted list every key
// before its own in the provisioning order, named <clusterName>-<key>; for
// an explicit list the nodes named and, through those that are down, what
// they name), the tenant's Backend, and the workload of those it requires.
// A node of the tenant with a key has that name (defaults.KeyOf), so no
// node it can require is missed by reading these names.

// maxNodesByName bounds the nodes a pod admission reads by name: a
// defaulted list of frontend n names every key before it, and beyond this
// many the tenant is read whole.
const maxNodesByName = 32

// PodScope returns, sorted, the nodes whose objects
// PodsMayStartByName(s, name) rests on, as far as the nodes of s tell: a
// node named that s lacks may, once read, name more. The caller reads those
// it has not read and asks again, until it has read every one (found or
// absent). It returns false when there are more than maxNodesByName.
func PodScope(s *Snapshot, name string) ([]string, bool) {
	in := map[string]bool{name: true}
	if n, ok := s.Nodes[name]; ok && n.NodeKind() == v2alpha1.KindFrontend {
		in[defaults.NodeName(s.Tenant.ClusterName, defaults.Backend)] = true
	}
	l := defaults.ProvisioningList
	order := l.Order(s.Orders)
	seen := map[string]bool{name: true}
	var walk func(x string)
	walk = func(x string) {
		n, ok := s.Nodes[x]
		if !ok {
			return
		}
		if defaults.IsDefaulted(n, l) {
			k, ok := defaults.KeyOf(n)
			for prev, more := order.Predecessor(k); ok && more && len(in) <= maxNodesByName; prev, more = order.Predecessor(prev) {
				in[defaults.NodeName(s.Tenant.ClusterName, prev)] = true
			}
			return
		}
		for _, p := range l.Get(n.NodeSpec()) {
			in[p.ExpressNode] = true
			if dep, ok := s.Nodes[p.ExpressNode]; ok && !Live(dep) && !seen[p.ExpressNode] {
				seen[p.ExpressNode] = true
				walk(p.ExpressNode)
			}
		}
	}
	walk(name)
	return slices.Sorted(maps.Keys(in)), len(in) <= maxNodesByName
}

// PodsMayStartByName reports whether new pods of node name may start on s
// by the rule alone: the node is not live, is released regardless of its
// prerequisites, or none of its live provisioning predecessors holds it.
// It leaves out PodsMayStart's exception for a half-done rollout, which
// rests on who waits for whom in the whole tenant. On a snapshot holding
// every node PodScope names (read, or read absent) and the workload of
// those other than name, it returns true only where PodsMayStart on the
// whole tenant does: the requirements are the same, and what the snapshot
// lacks — the records other nodes keep that a predecessor converged
// (released-after) — can only add a blocker. So can a node named and not
// read: it counts as missing. The one list a node not read would leave
// out is a defaulted one, which requires the live nodes of the keys before
// its own: PodScope names every one of those keys.
func PodsMayStartByName(s *Snapshot, name string) bool {
	n, ok := s.Nodes[name]
	if s.SharedNames[name] {
		return false // the read by name sends a shared name to the whole tenant first (fallbackPodBoth): kept for any other caller
	}
	if !ok || !Live(n) || annotated(n, v2alpha1.AnnotationIgnorePrerequisites) {
		return ok
	}
	blockers, _ := newPlanner(s).wait(name, false, nil)
	return len(blockers) == 0
}

// PodWorkloadScope returns, sorted, the nodes of scope whose workload
// PodsMayStartByName(s, name) reads: all but name itself.
func PodWorkloadScope(scope []string, name string) []string {
	return slices.DeleteFunc(slices.Clone(scope), func(n string) bool { return n == name })
}
