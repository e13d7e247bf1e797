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
	// less than this after the node's previous one, or made while the
	// settle hold holds the node, continues its run of changes (runBegan).
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
//     landing timeout), and so is where the settle cap counts the node's
//     run of changes from (runBegan);
//   - the date another node left the tenant (node-left-tenant-at) is the
//     sequencer's to write, and only ever later, but for the sequencer's
//     own re-dating of one ahead of its clock.
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
	if list, ok := ann[v2alpha1.AnnotationRenderedNodes]; ok && RenderedNodes(ann) == nil && (a.Old == nil || list != old[v2alpha1.AnnotationRenderedNodes]) {
		warnings = append(warnings, fmt.Sprintf("annotation %s=%q names no node: it is taken as no list, and every node of the tenant is part of the landing of rollout-id %q",
			v2alpha1.AnnotationRenderedNodes, list, ann[v2alpha1.AnnotationRolloutID]))
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
	// else's, is put back — a replica whose clock is behind must not move
	// a date back. Only the sequencer dates a departure earlier, over the
	// very date it names (AnnotationNodeLeftTenantAtReplaces): one ahead of
	// its clock, that a replica whose clock ran ahead wrote
	// (FutureDepartures); and no earlier than this replica's now, so that a
	// departure admitted before the re-dating, whose date the one it
	// replaces covered, is still held for the settle time.
	left, replaces := ann[v2alpha1.AnnotationNodeLeftTenantAt], ann[v2alpha1.AnnotationNodeLeftTenantAtReplaces]
	delete(ann, v2alpha1.AnnotationNodeLeftTenantAtReplaces)
	restore(ann, old, v2alpha1.AnnotationNodeLeftTenantAt)
	stored := old[v2alpha1.AnnotationNodeLeftTenantAt]
	at, err := time.Parse(time.RFC3339Nano, left)
	switch {
	case !a.FromSequencer || err != nil:
	case replaces != "" && replaces == stored:
		ann[v2alpha1.AnnotationNodeLeftTenantAt] = laterOf(at, a.Now).UTC().Format(time.RFC3339Nano)
	case at.After(stampIn(old, v2alpha1.AnnotationNodeLeftTenantAt)):
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
		ann[v2alpha1.AnnotationTargetChangesBeganAt] = a.runBegan(old).UTC().Format(time.RFC3339Nano)
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

// runBegan returns, for a target or order change admitted now to a node
// whose stored annotations are old, the start of its run of changes as the
// settle cap counts it (AnnotationTargetChangesBeganAt): the sequencer
// holds the tenant for the change no longer than the cap after it.
//
// The run goes on while each change comes less than the settle time after
// the one before, or while the node's Settling condition says the settle
// hold still holds it (until "releases at", whichever change that hold is
// for); otherwise the change begins a new run, now. The hold is judged on
// this replica's clock against a "releases at" another replica's stamps
// made, so it is allowed half the settle time more (clockSkew): a replica
// whose clock runs a little ahead would otherwise see the hold of a node
// rewritten just faster than the settle time as over at every change it
// admits, begin a new run each time, and the node never reach its cap.
// The gap is not: a node released between two changes (its condition no
// longer Settling) begins a new run with the next one the settle time
// after, however often it is changed so. A change after a render that
// came with its own rollout-id goes on with the run, the whole gap
// uncounted: the settle hold never held the render (the id groups it), so
// renders that land at once, however many and however close, take nothing
// from the cap of the edits after them. A run's start that
// lies ahead of this replica's clock (another replica's clock runs ahead)
// is taken as now, and a previous change ahead of it as made now: the run
// goes on, counted from no later than now, so that neither a clock a day
// ahead nor two replicas whose clocks differ keep a run from its cap. What
// the cap counts is
// how long the run's changes have held the tenant, each until the next or
// for the settle time, whichever is sooner: a change that comes later than
// the settle time after the one before moves the start on by the rest of
// that gap, which the earlier change did not hold. So a node rewritten
// forever holds its tenant for the cap in all — faster than the settle
// time or slower, alone or out of step with other nodes rewritten forever,
// each of which holds it for its own cap — and a node changed again within
// a long hold (a second apply after a slow first one) holds the tenant for
// the settle time after its new change, as any change does, unless its
// changes have held it for the cap already.
func (a Admission) runBegan(old map[string]string) time.Time {
	prev := lastChange(old)
	began := stampIn(old, v2alpha1.AnnotationTargetChangesBeganAt)
	if a.Old == nil || prev.IsZero() || began.IsZero() {
		return a.Now
	}
	if began.After(a.Now) {
		began = a.Now
	}
	gap := max(0, a.Now.Sub(prev))
	skew := a.SettleTime / clockSkew
	if gap >= a.SettleTime && !a.Now.Before(settleHeldUntil(a.Old).Add(skew)) {
		return a.Now
	}
	if renderedWithItsID(old) {
		// The change before was a render that came with its own
		// rollout-id: grouped by that id, the settle hold never held it,
		// and it counts nothing of the gap (renders that land at once,
		// released and rolled within the settle time, would otherwise use
		// up the cap of the edits after them).
		return earlierOf(began.Add(gap), a.Now)
	}
	return began.Add(max(0, gap-a.SettleTime))
}

// clockSkew divides the settle time into the most the clocks of
// express-sequencer's replicas may differ by: half the settle time.
const clockSkew = 2

// settleHeldUntil returns until when node n's condition says the settle
// hold holds it, zero when it is not gated or not held by the settle
// hold (a Settling condition a stopped sequencer left behind says a time
// long past).
func settleHeldUntil(n v2alpha1.Node) time.Time {
	c := PrerequisitesCondition(n)
	if !Gated(n) || c == nil || c.Reason != v2alpha1.ReasonSettling {
		return time.Time{}
	}
	return settleHoldEnd(c)
}

// earlierOf is the earlier of two times.
func earlierOf(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// laterOf is the later of two times.
func laterOf(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
