package rollout

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// Admission is what the mutating webhook knows of one admission of a node.
type Admission struct {
	// Old is the stored node of an update; nil on create.
	Old v2alpha1.Node
	// OldHash and Hash are the target hashes of the stored and the admitted
	// raw spec (TargetHash).
	OldHash, Hash string
	// FromSequencer is true when the request comes from express-sequencer's
	// own sequencer: only it removes the gate and records a release.
	FromSequencer bool
	// Now stamps target, order and rollout-id changes.
	Now time.Time
	// SettleTime is the sequencer's settle time: a target or order change
	// less than this after the node's previous one continues its run of
	// changes.
	SettleTime time.Duration
}

// SequencerOnly are the annotations only the sequencer writes: the record
// of a release.
var SequencerOnly = []string{v2alpha1.AnnotationReleasedTarget, v2alpha1.AnnotationReleasedGeneration, v2alpha1.AnnotationReleasedAfter, v2alpha1.AnnotationReleasedSetRevision, v2alpha1.AnnotationReleasedAt}

// WebhookOnly are the annotations the admission webhook writes and keeps
// (a user's value is overwritten or put back): with SequencerOnly, every
// annotation express-sequencer adds to what a chart renders.
var WebhookOnly = []string{v2alpha1.AnnotationTargetHash, v2alpha1.AnnotationDefaultedPrerequisites, v2alpha1.AnnotationTargetChangedAt,
	v2alpha1.AnnotationOrderChangedAt, v2alpha1.AnnotationNodeLeftTenantAt, v2alpha1.AnnotationTargetChangesBeganAt, v2alpha1.AnnotationRolloutIDChangedAt, v2alpha1.AnnotationRolloutHistory, v2alpha1.AnnotationTargetRolloutID}

// Admit applies the admission rules to node n in place and returns the
// admission warnings:
//
//   - the target hash is stamped, overwriting whatever a user wrote;
//   - the release record (SequencerOnly) keeps its stored values
//     unless the sequencer writes them; a node that predates
//     express-sequencer (stored ungated, never stamped, never released) is
//     adopted: its running target is recorded as released, so it is not
//     rolled again;
//   - the gate is added on create of an up node, on an update whose target
//     hash changed, and on up: false → true; a gate someone other than the
//     sequencer removes is put back (the escape hatch is ignore-prerequisites),
//     and one someone else adds otherwise is dropped (the way to hold a node
//     is pause-rollout);
//   - the rollout a new target replaces is kept in the node's
//     rollout-history, which no one else changes;
//   - target, order (orderOf: the tenant, up, paused, a prerequisite list
//     of the user's) and rollout-id changes are timestamped (settle time,
//     landing timeout), and so is the start of the node's run of changes —
//     each less than the settle time after the one before, or made while
//     the settle hold has held the node unbroken since its own (settle
//     cap);
//   - the date another node left the tenant (node-left-tenant-at) is the
//     sequencer's to write, and only ever later.
//
// A node being deleted is not rolled out again: only its annotations are
// kept honest.
func Admit(n v2alpha1.Node, a Admission) []string {
	var warnings []string
	ann := n.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	var old map[string]string
	if a.Old != nil {
		old = a.Old.GetAnnotations()
	}
	ann[v2alpha1.AnnotationTargetHash] = a.Hash
	if a.Old != nil && a.Hash == a.OldHash && old[v2alpha1.AnnotationTargetHash] != "" {
		// The target did not change: keep the stamp the pods carry, even
		// if hashing the stored object now gives another value (a field
		// the API server defaults since, another hashing scheme).
		ann[v2alpha1.AnnotationTargetHash] = old[v2alpha1.AnnotationTargetHash]
	}
	if !a.FromSequencer {
		for _, key := range SequencerOnly {
			if ann[key] != old[key] {
				warnings = append(warnings, fmt.Sprintf("annotation %s is written by express-sequencer only: the change was dropped", key))
			}
			restore(ann, old, key)
		}
	}
	if a.Old != nil && old[v2alpha1.AnnotationTargetHash] == "" && !a.Old.NodeSpec().HasGate(v2alpha1.GateSequencer) &&
		old[v2alpha1.AnnotationReleasedTarget] == "" && a.OldHash != "" {
		// Adoption: a node stored before express-sequencer (never stamped by
		// this webhook). A node it admitted and never released — one
		// created down — is not adopted: it was never rolled out.
		ann[v2alpha1.AnnotationReleasedTarget] = a.OldHash
	}
	// The sequencer dates, on the nodes of a tenant that stay, the
	// departure of one of them (DeletionDater), with its own clock: a
	// later date of its is kept as written; an earlier one, or anyone
	// else's, is put back.
	left := ann[v2alpha1.AnnotationNodeLeftTenantAt]
	restore(ann, old, v2alpha1.AnnotationNodeLeftTenantAt)
	if at, err := time.Parse(time.RFC3339Nano, left); a.FromSequencer && err == nil && at.After(stampIn(old, v2alpha1.AnnotationNodeLeftTenantAt)) {
		ann[v2alpha1.AnnotationNodeLeftTenantAt] = left
	}
	restore(ann, old, v2alpha1.AnnotationTargetChangedAt)
	restore(ann, old, v2alpha1.AnnotationOrderChangedAt)
	restore(ann, old, v2alpha1.AnnotationTargetChangesBeganAt)
	restore(ann, old, v2alpha1.AnnotationRolloutHistory)
	restore(ann, old, v2alpha1.AnnotationTargetRolloutID)
	if ann[v2alpha1.AnnotationRolloutID] != old[v2alpha1.AnnotationRolloutID] {
		ann[v2alpha1.AnnotationRolloutIDChangedAt] = a.Now.UTC().Format(time.RFC3339Nano)
	} else {
		restore(ann, old, v2alpha1.AnnotationRolloutIDChangedAt)
	}
	n.SetAnnotations(ann) // the map itself: the writes below land in it too
	if n.GetDeletionTimestamp() != nil {
		return warnings
	}

	spec := n.NodeSpec()
	newTarget := a.Old == nil || a.Hash != a.OldHash || spec.IsUp() && !a.Old.NodeSpec().IsUp()
	if newTarget {
		// A new rollout: the one it replaces is kept, and the rollout-id
		// it comes with is its own.
		if a.Old != nil {
			keepInHistory(ann, a.Old, a.Now)
		}
		if id := ann[v2alpha1.AnnotationRolloutID]; id != "" {
			ann[v2alpha1.AnnotationTargetRolloutID] = id
		} else {
			delete(ann, v2alpha1.AnnotationTargetRolloutID)
		}
	}
	// A change of the node's order — created down or taken down, a prerequisite
	// list of the user's, a pause set or lifted, a move to another tenant
	// — is dated too, for the
	// settle time to group it with the rest of its apply: it frees or holds
	// the nodes after it as a rollout does. A target change of a node that
	// stays down is not: the nodes after it walk through it to its lists,
	// which it leaves as they were.
	rollout := spec.IsUp() && newTarget
	orderChanged := a.Old == nil && !spec.IsUp() || a.Old != nil && orderOf(a.Old) != orderOf(n)
	if rollout || orderChanged {
		now := a.Now.UTC().Format(time.RFC3339Nano)
		// The node's run of changes goes on while its changes come less
		// than the settle time apart, or while it is still held by the
		// settle hold that has held it unbroken since its own last change,
		// however far apart (a node rewritten while the hold lasts is
		// capped from its first change, whatever the settle time the
		// sequencer holds with, and so are two rewritten out of step;
		// the hold's start is known from each node's latest change only,
		// so three or more can seem to leave a gap, and go on holding). A
		// node held for anything else — a pause, a prerequisite, a settle
		// hold that began after its last change — begins a new run: its
		// change must hold the tenant like any other.
		prev := lastChange(old)
		goesOn := a.Old != nil && !prev.IsZero() && (heldBySettling(a.Old, a.Now, prev) || a.Now.Sub(prev) < a.SettleTime)
		if !goesOn || ann[v2alpha1.AnnotationTargetChangesBeganAt] == "" {
			ann[v2alpha1.AnnotationTargetChangesBeganAt] = now
		}
		if rollout {
			ann[v2alpha1.AnnotationTargetChangedAt] = now
		} else {
			ann[v2alpha1.AnnotationOrderChangedAt] = now
		}
	}
	switch {
	case rollout:
		spec.AddGate(v2alpha1.GateSequencer)
	case a.Old != nil && a.Old.NodeSpec().HasGate(v2alpha1.GateSequencer) && !spec.HasGate(v2alpha1.GateSequencer) && !a.FromSequencer:
		spec.AddGate(v2alpha1.GateSequencer)
		warnings = append(warnings, fmt.Sprintf(
			"the %s gate is removed by express-sequencer only, and was put back; to release %s regardless of its prerequisites, annotate it %s=true",
			v2alpha1.GateSequencer, n.GetName(), v2alpha1.AnnotationIgnorePrerequisites))
	case spec.HasGate(v2alpha1.GateSequencer) && (a.Old == nil || !a.Old.NodeSpec().HasGate(v2alpha1.GateSequencer)) && !a.FromSequencer:
		// A user's write that carries the gate without a change of target
		// (kubectl get -o yaml applied back, a manifest that kept it) would
		// gate the node again for the target it was released for: only a
		// target change or bringing the node back up gates it.
		spec.RemoveGate(v2alpha1.GateSequencer)
		warnings = append(warnings, fmt.Sprintf(
			"the %s gate is added by express-sequencer only, when the node's target changes or it is brought back up: it was dropped; to hold %s, annotate it %s=true",
			v2alpha1.GateSequencer, n.GetName(), v2alpha1.AnnotationPauseRollout))
	}
	return warnings
}

// orderOf says what of node n orders it, not what it rolls out: its
// tenant (a node that stays down and moves in changes the order of the
// tenant it joins; the tenant it leaves is dated by DeletionDater), whether
// it is up, whether it is paused, and each prerequisite list the user set
// (a defaulted list is the operator's order, "the nodes before me",
// whatever it holds).
func orderOf(n v2alpha1.Node) string {
	parts := []string{strconv.Quote(n.NodeSpec().ClusterConfig.ClusterName), strconv.FormatBool(n.NodeSpec().IsUp()), strconv.FormatBool(annotated(n, v2alpha1.AnnotationPauseRollout))}
	for _, l := range defaults.Lists {
		if defaults.IsDefaulted(n, l) {
			parts = append(parts, "defaulted")
			continue
		}
		list, _ := json.Marshal(l.Get(n.NodeSpec())) // prerequisites always marshal
		parts = append(parts, string(list))
	}
	return strings.Join(parts, " ")
}

// lastChange returns when the node's target or order last changed (the
// later of AnnotationTargetChangedAt and AnnotationOrderChangedAt); zero
// when neither is stamped. ann nil reads as none.
func lastChange(ann map[string]string) time.Time {
	target, order := stampIn(ann, v2alpha1.AnnotationTargetChangedAt), stampIn(ann, v2alpha1.AnnotationOrderChangedAt)
	if order.After(target) {
		return order
	}
	return target
}

// restore sets key in ann to its value in old, or removes it when old has none.
func restore(ann, old map[string]string, key string) {
	if v, ok := old[key]; ok {
		ann[key] = v
	} else {
		delete(ann, key)
	}
}

// heldBySettling reports whether the node is gated and its condition says
// the settle hold holds it until after now, and has held it without a
// break since the node's own latest change, prev, or before (its hold for
// that change, joined by others'). A Settling the sequencer wrote before it
// stopped says a hold that has ended: it continues no run. Nor does a hold
// that began after prev: the node may have been gated for longer than the
// cap (waiting for a prerequisite) before another node's change held it,
// and its change, continuing a run that long, would hold nothing of its
// own.
func heldBySettling(n v2alpha1.Node, now, prev time.Time) bool {
	c := PrerequisitesCondition(n)
	if !Gated(n) || c == nil || c.Reason != v2alpha1.ReasonSettling || !now.Before(settleHoldEnd(c)) {
		return false
	}
	since := settleHoldSince(c)
	return !since.IsZero() && !since.After(prev)
}
