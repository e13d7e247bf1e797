package rollout

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// RolloutRecord is one rollout of a node, as the API server keeps it: the
// target it rolled to, and when the node was gated for it, released and
// Ready on it. A time is zero when it is not (yet) known.
type RolloutRecord struct {
	// Target is the target hash.
	Target string `json:"target"`
	// RolloutID is the node's rollout-id for that target ("" without one).
	RolloutID string `json:"rolloutID,omitempty"`
	// Gated is when the admission webhook gated the node for the target.
	Gated time.Time `json:"gated,omitzero"`
	// Released is when the sequencer released it.
	Released time.Time `json:"released,omitzero"`
	// Ready is when the sequencer recorded it Ready on the target
	// (RolloutComplete), to the second; a crash and recovery since move
	// it.
	Ready time.Time `json:"ready,omitzero"`
	// Replaced is when a new target (or bringing the node back up)
	// replaced the rollout: set on the records of the rollout-history.
	Replaced time.Time `json:"replaced,omitzero"`
	// Converged, on a record of the rollout-history, is whether the node
	// recorded the rollout converged when it was replaced — Ready on its
	// target then, or recovering from a crash since. A node gated again
	// and brought back to that target tells by it a recovery from a
	// rollout the change overtook. Nil on a record kept by a webhook of an
	// earlier version: unknown.
	Converged *bool `json:"converged,omitempty"`
	// Down, on a record of the rollout-history, is whether the rollout was
	// replaced by bringing the node back up (up: false → true).
	Down bool `json:"down,omitempty"`
	// After are the prerequisites whose converged rollouts the release
	// relied on; in a kept record, the first historyAfter of them, and
	// AfterOmitted says how many more there were.
	After        []string `json:"after,omitempty"`
	AfterOmitted int      `json:"afterOmitted,omitempty"`
}

// A kept record names at most historyAfter prerequisites, and the whole
// rollout-history is kept under historyBytes, dropping the oldest records:
// a node with a thousand prerequisites must not push its annotations past
// the API server's limit (256 KiB in all).
const (
	historyAfter = 32
	historyBytes = 16 << 10
)

// RecordOf is the record of node n's current rollout (recordOf).
func RecordOf(n v2alpha1.Node) RolloutRecord { return recordOf(n) }

// recordOf is the node's current rollout as its stored object says: its
// target and the rollout-id it came with, when it was gated for it, and —
// once released for it — when, after whom, and when it was recorded Ready
// on it. A node that carries the sequencer's gate is not released for its
// current rollout, whatever an earlier release of the same target says (a
// change reverted before its release, a node brought back up).
func recordOf(n v2alpha1.Node) RolloutRecord {
	ann := n.GetAnnotations()
	r := RolloutRecord{Target: ann[v2alpha1.AnnotationTargetHash], RolloutID: ann[v2alpha1.AnnotationTargetRolloutID],
		Gated: stamp(n, v2alpha1.AnnotationTargetChangedAt)}
	if _, ok := ann[v2alpha1.AnnotationTargetRolloutID]; !ok && !stamp(n, v2alpha1.AnnotationRolloutIDChangedAt).After(r.Gated) {
		// Stamped before target-rollout-id was kept: the rollout-id it
		// carries is its target's unless a later one came since.
		r.RolloutID = ann[v2alpha1.AnnotationRolloutID]
	}
	if !released(n) {
		return r
	}
	r.Released = stamp(n, v2alpha1.AnnotationReleasedAt)
	var after map[string]string
	if json.Unmarshal([]byte(ann[v2alpha1.AnnotationReleasedAfter]), &after) == nil {
		delete(after, n.GetName()) // its own rollout, converged when released
		r.After = slices.Sorted(maps.Keys(after))
	}
	c := PrerequisitesCondition(n)
	released, err := strconv.ParseInt(ann[v2alpha1.AnnotationReleasedGeneration], 10, 64)
	if c != nil && c.Reason == v2alpha1.ReasonRolloutComplete && (err != nil || c.ObservedGeneration >= released) {
		r.Ready = c.LastTransitionTime.Time
	}
	return r
}

// HistoryIn decodes a node's rollout-history annotation: its earlier
// rollouts, oldest first. A record that cannot be read is left out.
func HistoryIn(n v2alpha1.Node) []RolloutRecord {
	var records []RolloutRecord
	if raw := n.GetAnnotations()[v2alpha1.AnnotationRolloutHistory]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &records) // written by the webhook only; unreadable is empty
	}
	return records
}

// CutForCache cuts, in a node's annotations ann, what a copy kept to decide
// on (a cache, never written back) need not hold whole: the manifest kubectl
// apply keeps to the prerequisite lists it sets (defaults.ShrinkLastAppliedIn),
// and the rollout-history — up to 16 KiB a node, read by the plan only for
// the target of each record and the release and convergence of the last —
// to those fields (cutHistoryIn). A plan on the cut copy decides as on the
// whole one; cutting twice changes nothing.
func CutForCache(ann map[string]string) {
	defaults.ShrinkLastAppliedIn(ann)
	cutHistoryIn(ann)
}

// cutHistoryIn keeps, of each record of the rollout-history in ann, the
// fields the plan reads (AwaitsRelease, releaseConverged): the target of
// every record, and the release, readiness, convergence and Down of the
// last. A history that does not decode is left whole, for HistoryIn to
// read as it reads the stored one.
func cutHistoryIn(ann map[string]string) {
	raw, ok := ann[v2alpha1.AnnotationRolloutHistory]
	if !ok || raw == "" {
		return
	}
	var records []RolloutRecord
	if json.Unmarshal([]byte(raw), &records) != nil {
		return
	}
	cut := make([]RolloutRecord, len(records))
	for i, r := range records {
		cut[i] = RolloutRecord{Target: r.Target}
	}
	if last := len(records) - 1; last >= 0 {
		r := records[last]
		cut[last] = RolloutRecord{Target: r.Target, Released: r.Released, Ready: r.Ready, Converged: r.Converged, Down: r.Down}
	}
	data, err := json.Marshal(cut)
	if err != nil {
		return // cannot happen: strings and times only
	}
	ann[v2alpha1.AnnotationRolloutHistory] = string(data)
}

// released reports whether the node is released for its current target.
func released(n v2alpha1.Node) bool {
	target := n.GetAnnotations()[v2alpha1.AnnotationTargetHash]
	return target != "" && n.GetAnnotations()[v2alpha1.AnnotationReleasedTarget] == target && !Gated(n)
}

// keepInHistory appends the rollout of old (the node as stored, its target
// about to be replaced at now) to the rollout-history in ann, keeping the
// last RolloutHistoryLength. A target the node was never released for
// rolled nothing out (a change superseded while it waited): it is not
// kept.
func keepInHistory(ann map[string]string, old v2alpha1.Node, now time.Time) {
	if !released(old) {
		return
	}
	r := recordOf(old)
	r.Replaced = now.UTC()
	converged := convergedAsStored(old)
	r.Converged, r.Down = &converged, !old.NodeSpec().IsUp()
	if len(r.After) > historyAfter {
		r.After, r.AfterOmitted = r.After[:historyAfter], len(r.After)-historyAfter
	}
	records := append(HistoryIn(old), r)
	if len(records) > v2alpha1.RolloutHistoryLength {
		records = records[len(records)-v2alpha1.RolloutHistoryLength:]
	}
	for len(records) > 0 {
		data, err := json.Marshal(records)
		if err != nil {
			return // cannot happen: strings and times only
		}
		if len(data) <= historyBytes {
			ann[v2alpha1.AnnotationRolloutHistory] = string(data)
			return
		}
		records = records[1:]
	}
}
