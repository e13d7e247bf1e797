package rollout

import (
	"fmt"
	"slices"
)

// ReleaseStands is the check the API server asks for as a release is
// written (the validating webhooks): does Plan, on s — the tenant read at
// that moment — release node name (pod empty), or the scheduling gate of its
// pod called pod? A release decided on state that has changed since (a
// sequencer frozen between its read and its write, a leader that lost its
// lease while a write was under way) stands only if the state it meets lets
// it go too. Otherwise it returns why the node or the pod is held now.
//
// A pod's release is judged only for a held pod that counts for the node as
// it is now; any other is refused.
//
// Only the gate is judged, not the record written with it: a record states
// which rollouts had converged, a fact no later state undoes.
func ReleaseStands(s *Snapshot, name, pod string) (bool, string) {
	if _, ok := s.Nodes[name]; !ok {
		return true, "" // no such node: nothing orders it
	}
	if s.SharedNames[name] {
		// The snapshot holds one node per name, perhaps the other kind's:
		// its decision is not this node's. Plan holds a gated node of a
		// shared name, and every pod of one.
		return false, sharedNameBlocker(name).message
	}
	if pod != "" && !slices.ContainsFunc(s.Pods[name], func(p Pod) bool { return p.Name == pod && p.HeldBySequencer() }) {
		// Asked as the pod's gate is removed, the pod is there, held: read
		// after it, a tenant that does not hold it as the node's has it not
		// count for the node as it is now — a pod of an earlier node of the
		// name (deleted and made again since the release was planned), left
		// to the garbage collector. Let go, it would run whatever the new
		// node's prerequisites are.
		return false, fmt.Sprintf("pod %s does not count for %s as it is now (a pod of an earlier node of the name, or not one of the node's own)", pod, name)
	}
	for _, d := range Plan(s) {
		if d.Node != name {
			continue
		}
		switch {
		case pod == "" && !d.Gated, pod != "" && slices.Contains(d.PodsToRelease, pod):
			return true, ""
		case pod == "":
			return false, d.Condition.Message
		}
		if _, why := PodsMayStart(s, name); why != "" {
			return false, why
		}
		return false, fmt.Sprintf("%s: %s", d.Condition.Reason, d.Condition.Message)
	}
	return true, ""
}
