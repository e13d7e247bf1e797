package rollout

import (
	"slices"
	"time"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// NodeRollout is one node's part in one of its tenant's rollouts.
type NodeRollout struct {
	Node string `json:"node"`
	Kind string `json:"kind"`
	RolloutRecord
	// Current is true for the node's rollout now; the others come from
	// its rollout-history.
	Current bool `json:"current"`
	// Reason, WaitingFor and Message are, for the current rollout, what
	// the sequencer's Plan says of the node now.
	Reason     string   `json:"reason,omitempty"`
	WaitingFor []string `json:"waitingFor,omitempty"`
	Message    string   `json:"message,omitempty"`
	// gated: the node carries the sequencer's gate now.
	gated bool
}

// inFlightReasons are the reasons of a released node still rolling its
// target out.
var inFlightReasons = []string{v2alpha1.ReasonReleased, v2alpha1.ReasonPrerequisitesIgnored, v2alpha1.ReasonRolloutPodsHeld, v2alpha1.ReasonProgressDeadlineExceeded}

// over reports whether the node's part in its rollout is over: Ready on
// the target, replaced by a newer one, or — for the current rollout — not
// gated and not rolling (down, or recovering from a crash since).
func (r NodeRollout) over() bool {
	return !r.Ready.IsZero() || !r.Replaced.IsZero() || r.Current && !r.gated && !slices.Contains(inFlightReasons, r.Reason)
}

// end is when the node's part ended, as far as is known: Ready (to the
// second, so never before the release), or else replaced, or else the
// latest of its release and gating.
func (r NodeRollout) end() time.Time {
	end := r.at()
	if r.Released.After(end) {
		end = r.Released
	}
	switch {
	case !r.Ready.IsZero():
		if r.Ready.After(end) {
			end = r.Ready
		}
	case !r.Replaced.IsZero():
		end = r.Replaced
	}
	return end
}

// at is when the node's part began: gated, or released when the gating
// was not recorded (a release before rollout records were kept).
func (r NodeRollout) at() time.Time {
	if !r.Gated.IsZero() {
		return r.Gated
	}
	return r.Released
}

// TenantRollout is one change of a tenant and the rollouts of its nodes:
// those of one rollout-id, or, for changes without one, those gated before
// the change's first release (the sequencer holds a tenant's changes
// together until the first of them is released).
type TenantRollout struct {
	RolloutID string `json:"rolloutID,omitempty"`
	// Began is when the first of its nodes was gated.
	Began time.Time `json:"began"`
	// Ended is when the last of its nodes was Ready on target; zero while
	// one is not.
	Ended time.Time     `json:"ended,omitzero"`
	Nodes []NodeRollout `json:"nodes"`
}

// firstRelease is when the first of its nodes was released; zero when none
// was.
func (t TenantRollout) firstRelease() time.Time {
	var first time.Time
	for _, n := range t.Nodes {
		if !n.Released.IsZero() && (first.IsZero() || n.Released.Before(first)) {
			first = n.Released
		}
	}
	return first
}

// joins reports whether r belongs to rollout t, the newest so far: the same
// rollout-id, and for changes without one, gated before t's first release;
// a node takes part in a rollout once. (A rollout-id rendered again later —
// values reverted — is another change.)
func (t TenantRollout) joins(r NodeRollout) bool {
	if r.RolloutID != t.RolloutID || slices.ContainsFunc(t.Nodes, func(n NodeRollout) bool { return n.Node == r.Node }) {
		return false
	}
	first := t.firstRelease()
	return t.RolloutID != "" || first.IsZero() || !r.at().After(first)
}

// HistoryOf puts together a tenant's rollouts, newest first, from what its
// nodes keep — each node's current rollout and its rollout-history — and
// its plan (Plan(s)), which says where each current rollout stands now.
// Nodes within a rollout are in the order they were released; those not
// released last, in upgrade order.
func HistoryOf(s *Snapshot, decisions []Decision) []TenantRollout {
	byNode := map[string]Decision{}
	for _, d := range decisions {
		byNode[d.Node] = d
	}
	names := make([]string, 0, len(s.Nodes))
	for name := range s.Nodes {
		names = append(names, name)
	}
	names = s.inUpgradeOrder(names)
	pos := map[string]int{}
	for i, name := range names {
		pos[name] = i
	}
	var parts []NodeRollout
	for _, name := range names {
		n := s.Nodes[name]
		for _, r := range HistoryIn(n) {
			parts = append(parts, NodeRollout{Node: name, Kind: string(n.NodeKind()), RolloutRecord: r})
		}
		cur := NodeRollout{Node: name, Kind: string(n.NodeKind()), RolloutRecord: recordOf(n), Current: true, gated: Gated(n)}
		if d, ok := byNode[name]; ok {
			cur.Reason, cur.WaitingFor, cur.Message = d.Condition.Reason, d.WaitingFor, d.Condition.Message
		} else if c := PrerequisitesCondition(n); c != nil {
			cur.Reason, cur.Message = c.Reason, c.Message
		}
		parts = append(parts, cur)
	}
	parts = slices.DeleteFunc(parts, func(r NodeRollout) bool { return r.at().IsZero() })
	// Oldest first, so that a rollout is formed before a later one of the
	// same node would join it; stable, so that ties keep upgrade order.
	slices.SortStableFunc(parts, func(a, b NodeRollout) int { return a.at().Compare(b.at()) })
	var rollouts []TenantRollout
	for _, r := range parts {
		if len(rollouts) == 0 || !rollouts[len(rollouts)-1].joins(r) {
			rollouts = append(rollouts, TenantRollout{RolloutID: r.RolloutID, Began: r.at()})
		}
		rollouts[len(rollouts)-1].Nodes = append(rollouts[len(rollouts)-1].Nodes, r)
	}
	for i := range rollouts {
		t := &rollouts[i]
		slices.SortFunc(t.Nodes, func(a, b NodeRollout) int {
			switch {
			case a.Released.IsZero() != b.Released.IsZero():
				if a.Released.IsZero() {
					return 1
				}
				return -1
			case a.Released.IsZero() || a.Released.Equal(b.Released):
				return pos[a.Node] - pos[b.Node]
			}
			return a.Released.Compare(b.Released)
		})
		// Ended: every part over, at the latest time known of them (a
		// Ready time is to the second: never before the release).
		for _, n := range t.Nodes {
			if !n.over() {
				t.Ended = time.Time{}
				break
			}
			if n.end().After(t.Ended) {
				t.Ended = n.end()
			}
		}
	}
	slices.Reverse(rollouts)
	return rollouts
}
