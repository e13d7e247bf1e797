package rollout

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// AuditView is the snapshot the sequencer plans on in audit mode (DESIGN
// §9): every live node whose stamped target it has not released carries
// the sequencer's gate in this copy only — the hold enforcing would have
// put on it — so that Plan says what it would hold and when it would let
// each node go. The stored objects are not touched.
func AuditView(s *Snapshot) *Snapshot {
	out := *s
	out.Nodes = make(map[string]v2alpha1.Node, len(s.Nodes))
	out.Virtual = map[string]bool{}
	for name, n := range s.Nodes {
		if Live(n) && !Gated(n) && StampedTarget(n) != "" && newTarget(n) {
			held := n.DeepCopyObject().(v2alpha1.Node)
			held.NodeSpec().AddGate(v2alpha1.GateSequencer)
			n = held
			out.Virtual[name] = true
		}
		out.Nodes[name] = n
	}
	// A pod the pod webhook would have created scheduling-gated carries the
	// gate too, until the plan says it would let it go.
	out.Pods = make(map[string][]Pod, len(s.Pods))
	out.VirtualPods = map[string]bool{}
	for name, pods := range s.Pods {
		if !slices.ContainsFunc(pods, func(p Pod) bool { return p.WouldHold && !p.HeldBySequencer() }) {
			out.Pods[name] = pods
			continue
		}
		held := make([]Pod, len(pods))
		for i, p := range pods {
			if p.WouldHold && !p.HeldBySequencer() {
				p.Gates = append(slices.Clip(p.Gates), v2alpha1.GateSequencer)
				out.VirtualPods[p.Name] = true
			}
			held[i] = p
		}
		out.Pods[name] = held
	}
	return &out
}

// AuditDecisions turns a plan made on AuditView into audit mode's: no pod
// is let go (none is held), and each hold — of a node, or of a recovering
// node's new pods — is said as what the sequencer would hold
// (ReasonWouldHold), with the plan's own explanation. A release of a
// virtual hold stays a release: the patch records it (released-target) and
// touches no gate, and its message says nothing was held.
func AuditDecisions(s *Snapshot, decisions []Decision) []Decision {
	out := make([]Decision, len(decisions))
	for i, d := range decisions {
		d.PodsWouldRelease = slices.DeleteFunc(slices.Clone(d.PodsToRelease), func(pod string) bool { return !s.VirtualPods[pod] })
		if len(d.PodsToRelease) > 0 && d.Event != nil {
			// The Event eventFor made: the condition's message and the pods.
			d.Event.Message = withPods(d.Condition.Message, podsWouldReleaseNote, d.PodsToRelease)
		}
		d.PodsToRelease = nil
		name := d.Node
		if n := s.Nodes[d.Node]; n != nil {
			name = n.GetName()
		}
		switch {
		case d.Gated && s.Virtual[d.Node]:
			d.wouldHold(name)
		case !d.Gated && d.Condition.Status == metav1.ConditionFalse &&
			(slices.Contains(recoveryReasons, d.Condition.Reason) || d.Condition.Reason == v2alpha1.ReasonRolloutPodsHeld):
			d.wouldHold("new pods of " + name)
		case !d.Gated && s.Virtual[d.Node]:
			d.Condition.Message = "audit: nothing held it; enforcing would release it now: " + d.Condition.Message
			if d.Event != nil {
				d.Event.Message = "audit: nothing held it; enforcing would release it now: " + d.Event.Message
			}
		}
		out[i] = d
	}
	return out
}

// wouldHold rewrites a hold of what as what audit mode says of it.
func (d *Decision) wouldHold(what string) {
	d.Condition.Reason = v2alpha1.ReasonWouldHold
	d.Condition.Message = fmt.Sprintf("would hold %s: %s", what, d.Condition.Message)
	if d.Event != nil {
		d.Event.Type = corev1.EventTypeNormal
		d.Event.Reason = v2alpha1.ReasonWouldHold
		d.Event.Message = fmt.Sprintf("would hold %s: %s", what, d.Event.Message)
	}
}

// Unheld are, in enforce mode, the live nodes that carry no gate for a
// target the sequencer has not released: what audit mode leaves behind
// when a namespace is switched to enforce mid-rollout. Those the Express
// operator already rolls — a pod made for the target, let go (RunsTarget)
// — are adopted (their release recorded, as the webhook adopts a
// node that predates express-sequencer); the others are gated, to be
// released in their turn. Only a target hash label proves a rollout under
// way; without one the node is gated.
func Unheld(s *Snapshot) (adopt, gate []string) {
	for name, n := range s.Nodes {
		if !Live(n) || Gated(n) || StampedTarget(n) == "" || !newTarget(n) {
			continue
		}
		if RunsTarget(s, name, StampedTarget(n)) {
			adopt = append(adopt, name)
		} else {
			gate = append(gate, name)
		}
	}
	slices.Sort(adopt)
	slices.Sort(gate)
	return adopt, gate
}

// AdoptedConverged reports whether node name, adopted at a switch to
// enforce (Unheld), leaves its operator nothing to roll: Ready on its
// target, no pod or StatefulSet template made for another (fresh snapshots
// only). Its adoption records its own rollout converged, as a release that
// leaves nothing to roll does (Decision.ReleasedConverged): otherwise it
// reads as rolling until a pass sees it Ready, and its pods, lost before
// that, would go as a half-done rollout's beside a crashed predecessor
// gated for the same change instead of after it.
func AdoptedConverged(s *Snapshot, name string) bool { return s.nothingToRoll(name) }

// AdoptionRecords are the records of other nodes' converged rollouts that
// node name's adoption keeps (released-after), as a release keeps them: a
// record may be the only one left of a rollout whose RolloutComplete write
// was lost.
func AdoptionRecords(s *Snapshot, name string) map[string]string {
	return s.convergedRecords(s.Nodes[name], nil)
}

// RunsTarget reports whether a pod of node name carries target's hash and
// is not held by the sequencer's scheduling gate: the target runs, let go
// in audit mode, and gating the node cannot stop it. Only the target hash
// label proves it: version and revision labels (the contract's fallback)
// do not tell a config-only change from the target before it. A
// StatefulSet template moved to the target does not: its pods, made in
// enforce, are held for the node's release (AwaitsRelease), and a node
// adopted on its template alone would have them let go out of order.
func RunsTarget(s *Snapshot, name, target string) bool {
	return target != "" && slices.ContainsFunc(s.Pods[name], func(p Pod) bool { return p.Hash == target && !p.HeldBySequencer() })
}
