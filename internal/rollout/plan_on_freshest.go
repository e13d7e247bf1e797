package rollout

import (
	"errors"
	"slices"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// PlanOnFreshest chooses what a pass acts on: the plan of the cached
// snapshot, unless that plan releases anything or records a rollout
// complete — then the plan of a snapshot read fresh (readFresh; nil when
// there is no fresh reader, as in the preview). A nil cached snapshot (the
// cache could not be compared with the sequencer's own writes) is read
// fresh, and is an error without a fresh reader. It reports whether it read
// fresh.
func PlanOnFreshest(cached *Snapshot, readFresh func() (*Snapshot, error)) (*Snapshot, []Decision, bool, error) {
	if cached != nil {
		decisions := Plan(cached)
		if readFresh == nil || !needsFreshReads(cached, decisions) {
			return cached, decisions, false, nil
		}
	}
	if readFresh == nil {
		return nil, nil, false, errors.New("no snapshot to plan: none cached and no fresh reader")
	}
	snap, err := readFresh()
	if err != nil {
		return nil, nil, true, err
	}
	return snap, Plan(snap), true, nil
}

// ReleasesAny reports whether a plan removes a node's gate or a pod's.
func ReleasesAny(s *Snapshot, decisions []Decision) bool {
	return slices.ContainsFunc(decisions, func(d Decision) bool { return Releasing(s, d) || len(d.PodsToRelease) > 0 })
}

// needsFreshReads reports whether a plan releases anything or records a
// rollout complete.
func needsFreshReads(s *Snapshot, decisions []Decision) bool {
	return ReleasesAny(s, decisions) || slices.ContainsFunc(decisions, func(d Decision) bool {
		return d.Condition.Reason == v2alpha1.ReasonRolloutComplete && d.Changed(s.Nodes[d.Node])
	})
}

// Releasing reports whether the decision removes the node's gate.
func Releasing(s *Snapshot, d Decision) bool {
	return !d.Gated && Gated(s.Nodes[d.Node])
}
