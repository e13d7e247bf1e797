package rollout

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// This file reads the state of one node from the snapshot: live, Ready, on
// target, in flight. Plan, the pod webhook and kubectl-express all decide
// from these.

// Mode is how a gated node is rolled (DESIGN §4): provisioned (its first
// rollout, or a node brought back with the target it was released for) or
// upgraded (a target the sequencer has not released yet).
type Mode string

// The two modes.
const (
	ModeProvisioning Mode = "provisioning"
	ModeUpgrade      Mode = "upgrade"
)

// convergedReasons are the reasons the sequencer writes only once the node's
// released rollout was Ready on target: such a condition, observed at or after
// the release, proves the rollout converged.
var convergedReasons = append([]string{v2alpha1.ReasonRolloutComplete}, recoveryReasons...)

// recoveryReasons are the reasons of a recovering node (ungated, its pods
// lost on a target that had converged): every reason the planner writes
// for one (Decide: a cycle, or the reason of what its new pods wait for —
// a prerequisite not Ready, paused, missing, or pinned to what nothing
// meets, or a name shared with another node: sharedNameBlocker). One left
// out would read, at the next pass, as a rollout still under way, and the
// exception for a half-done rollout would let its pods go before its
// predecessors are Ready. (A gated node held for a shared name is gated:
// never read as converged.)
var recoveryReasons = []string{
	v2alpha1.ReasonRecovering, v2alpha1.ReasonWaitingForPrerequisite, v2alpha1.ReasonDependencyCycle,
	v2alpha1.ReasonRolloutPaused, v2alpha1.ReasonPrerequisiteNotFound, v2alpha1.ReasonPrerequisitePinUnreachable,
	v2alpha1.ReasonNameShared,
}

func isUp(n v2alpha1.Node) bool { return n.NodeSpec().IsUp() }

func annotated(n v2alpha1.Node, key string) bool { return n.GetAnnotations()[key] == "true" }

// Gated reports whether the node carries the sequencer's gate.
func Gated(n v2alpha1.Node) bool { return n.NodeSpec().HasGate(v2alpha1.GateSequencer) }

// Live reports whether the node is up and not being deleted. Only live
// nodes take part in the order.
func Live(n v2alpha1.Node) bool { return isUp(n) && n.GetDeletionTimestamp() == nil }

// isReady: at least one pod, every pod Ready, and none missing that the
// pods' controller wants.
func (s *Snapshot) isReady(name string) bool {
	ok, total := podsIn(s.Pods[name], string(corev1.PodReady), string(corev1.ConditionTrue), "", "")
	return total > 0 && ok == total && s.MissingPods[name] == 0
}

// onTarget: the node is not gated and every pod was created for its current
// target: it carries the node's target hash, or, for a pod without that
// label (an operator that does not copy it yet), the node's version and
// revision labels.
func (s *Snapshot) onTarget(name string) bool {
	n := s.Nodes[name]
	if Gated(n) {
		return false
	}
	for _, p := range s.Pods[name] {
		if !podOnTarget(n, p) {
			return false
		}
	}
	return true
}

func podOnTarget(n v2alpha1.Node, p Pod) bool {
	if p.Hash != "" {
		return p.Hash == StampedTarget(n)
	}
	return p.Version == n.NodeSpec().ExpressVersion && p.Revision == n.NodeSpec().DeploymentRevision
}

// onFallback reports whether some pod of the node is judged by its version
// and revision labels because it carries no target hash.
func (s *Snapshot) onFallback(name string) bool {
	return slices.ContainsFunc(s.Pods[name], func(p Pod) bool { return p.Hash == "" })
}

// setNamedOtherwise returns the name of a StatefulSet that owns a pod of
// the node and is not named after it, "" when there is none: the contract's
// naming rule broken, so a release that rests on the node reads the tenant
// whole (GatherScoped's fallback).
func (s *Snapshot) setNamedOtherwise(name string) string {
	for _, p := range s.Pods[name] {
		for _, ref := range p.Owners {
			if ref.Controller != nil && *ref.Controller && ref.Kind == "StatefulSet" && ref.Name != name {
				return ref.Name
			}
		}
	}
	return ""
}

// converged: Ready and on target.
func (s *Snapshot) converged(name string) bool { return s.isReady(name) && s.onTarget(name) }

// hasPendingWork: live, and gated or not converged.
func (s *Snapshot) hasPendingWork(name string) bool {
	n := s.Nodes[name]
	return Live(n) && (Gated(n) || !s.converged(name))
}

// newTarget reports whether the node's target is one the sequencer has not
// released: first rollouts and changes.
func newTarget(n v2alpha1.Node) bool { return StampedTarget(n) != ReleasedTarget(n) }

// AwaitsRelease reports whether a new pod of node name whose target-hash
// label is hash waits for the node's release for its current target,
// whatever the node's prerequisites (DESIGN §4: a new target waits for the
// node's release): a pod of its current target, which it is not released
// for — a revert to a target its history records too — or of a target it
// was never released for (neither its released target nor one its rollout
// history records: one a later change superseded before its release).
// Starting it would roll the node out of order. Such a pod is made only
// where the node's StatefulSet template was moved without a release: a
// node audit mode left ungated, rolled by the operator before the
// sequencer gated it at the switch to enforce (an unbounded window while
// no sequencer leads), or an operator that rolls a gated node.
//
// A pod of a target the node's StatefulSet template makes waits too,
// whatever the history says, unless that StatefulSet's spec has not
// changed since the node's latest release (templateUnmovedSinceRelease);
// so does one of a target no record names, unless so made (fresh
// snapshots only: the cache holds no template, and every release is
// planned again on a fresh read).
//
// Judged by the pod rule alone: a pod of the target the node is released
// for, or of another its history records and its template does not make
// (an ordinal a rolling update has not reached, made up from a revision its
// StatefulSet still holds); a pod with
// no target-hash label (the contract's fallback: its labels cannot tell a
// config-only change from the target before it); and, once the node is
// released for its current target, every pod of it — even one of a target
// it was never released for (a revert while such a pod was held), which,
// held for good, would stop the StatefulSet's rolling update: it waits for
// every pod Ready before it replaces one.
func (s *Snapshot) AwaitsRelease(name, hash string) bool {
	n := s.Nodes[name]
	switch {
	case !s.OfUnreleasedTarget(name, hash):
		return false
	case hash == StampedTarget(n):
		return true
	case s.templateUnmovedSinceRelease(name, hash):
		return false
	case !slices.ContainsFunc(HistoryIn(n), func(r RolloutRecord) bool { return r.Target == hash }):
		return true
	}
	return slices.ContainsFunc(s.SetTemplates[name], func(t Template) bool { return t.Hash == hash })
}

// templateUnmovedSinceRelease reports whether the StatefulSet node name's
// latest release recorded (released-set-revision) still makes pods of hash
// with its spec as it was then — the same UID and metadata.generation,
// which every change of its template moves on — and had finished rolling
// onto that template then (its currentRevision, recorded, is the revision
// its template is: a rolling update under way at the release would make
// pods of a target the node did not run whole). That template makes what
// the node ran when it was released, a release its operator never acted
// on (overtaken by the next change): its pods, lost or evicted and made
// again, are a recovery of what the node runs, which the pod rule judges.
// Held for the release, they would leave the node Ready only once
// released, and let it go first, by the provisioning order, ahead of its
// upgrade prerequisites. A StatefulSet whose generation moved on — its
// template moved away and back (a release carried out, then reverted in
// audit, or by an operator that rolls a gated node), or only scaled — is
// not told apart from one whose template moved: its pods wait.
func (s *Snapshot) templateUnmovedSinceRelease(name, hash string) bool {
	at, ok := releasedSet(s.Nodes[name])
	return ok && at.generation > 0 && slices.ContainsFunc(s.SetTemplates[name], func(t Template) bool {
		return t.Hash == hash && t.SetUID == at.uid && t.Generation == at.generation && t.UpdateRevision == at.revision
	})
}

// OfUnreleasedTarget reports whether a new pod of node name whose
// target-hash label is hash is of a target the node is not released for,
// while the node is not released for its current one: what AwaitsRelease
// judges, a read that holds no StatefulSet of the node may hold.
func (s *Snapshot) OfUnreleasedTarget(name, hash string) bool {
	n := s.Nodes[name]
	return n != nil && hash != "" && Live(n) && !released(n) && hash != ReleasedTarget(n)
}

// PodMayStart is PodsMayStart for one new pod of node name, made for the
// target whose hash its target-hash label carries: the pod rule, and the
// node's release where the pod awaits it (AwaitsRelease). It returns why
// the pod waits.
func PodMayStart(s *Snapshot, name, hash string) (bool, string) {
	ok, why := PodsMayStart(s, name)
	if ok && s.AwaitsRelease(name, hash) {
		return false, s.AwaitsReleaseMessage(name)
	}
	return ok, why
}

// AwaitsReleaseMessage says why a pod of node name waits for its release
// (AwaitsRelease).
func (s *Snapshot) AwaitsReleaseMessage(name string) string {
	return fmt.Sprintf("its pods made for a target it was never released for wait for %s's release for %s", name, describeTarget(s.Nodes[name]))
}

// mode returns how a gated node is rolled: a node released before is
// upgraded when its target is not the one released, or its workload was
// made for another target (a release overtaken before it was carried out,
// runsAnotherTarget).
func (s *Snapshot) mode(name string) Mode {
	n := s.Nodes[name]
	if ReleasedTarget(n) != "" && (newTarget(n) || s.runsAnotherTarget(name)) {
		return ModeUpgrade
	}
	return ModeProvisioning
}

// releasedGeneration returns the generation the node's latest release
// produced, 0 when unknown (a node adopted or released before the
// annotation existed).
func releasedGeneration(n v2alpha1.Node) int64 {
	g, err := strconv.ParseInt(n.GetAnnotations()[v2alpha1.AnnotationReleasedGeneration], 10, 64)
	if err != nil {
		return 0
	}
	return g
}

// convergenceKey identifies one release of a node: its UID and the
// generation the release produced; "" for a node with no recorded release.
func convergenceKey(n v2alpha1.Node) string {
	g := n.GetAnnotations()[v2alpha1.AnnotationReleasedGeneration]
	if g == "" {
		return ""
	}
	return string(n.GetUID()) + "/" + g
}

// convergedRecords returns the records node n's release writes: the
// convergence key of each of names (what it relies on) that is converged
// now, and the records n already carries of other nodes still in the
// tenant — a record stays true, and may be the only one left of a rollout
// whose RolloutComplete write was lost.
func (s *Snapshot) convergedRecords(n v2alpha1.Node, names []string) map[string]string {
	out := map[string]string{}
	var had map[string]string
	if raw := n.GetAnnotations()[v2alpha1.AnnotationReleasedAfter]; raw != "" && json.Unmarshal([]byte(raw), &had) == nil {
		for name, key := range had {
			// Its own rollout's record is its last release's, not the one
			// being made: left behind.
			if m := s.Nodes[name]; m != nil && name != n.GetName() && strings.HasPrefix(key, string(m.GetUID())+"/") {
				out[name] = key
			}
		}
	}
	for _, name := range names {
		m := s.Nodes[name]
		if m == nil || !s.converged(name) || newTarget(m) {
			continue
		}
		if k := convergenceKey(m); k != "" {
			out[name] = k
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// recordedConverged reports whether some node's release recorded the
// node's current release as converged (released-after).
func (s *Snapshot) recordedConverged(name string) bool {
	k := convergenceKey(s.Nodes[name])
	if k == "" {
		return false
	}
	for _, other := range s.Nodes {
		if carriesRecord(other, name, k) {
			return true
		}
	}
	return false
}

// carriesRecord reports whether node n's released-after records the
// release of node name with convergence key k. The sequencer writes the
// record as a JSON object of plain strings (node names, UIDs, digits and
// "/" need no escaping), so one entry reads back as exactly this text.
func carriesRecord(n v2alpha1.Node, name, k string) bool {
	return strings.Contains(n.GetAnnotations()[v2alpha1.AnnotationReleasedAfter], strconv.Quote(name)+":"+strconv.Quote(k))
}

// releaseConverged reports whether the rollout of node name's latest
// release is known to have converged, Ready or not now, or the node came
// back up since: a release recorded it (released-after, the node's own or
// a dependent's), its condition says so at or after the release, its
// StatefulSet records it (SetsConverged), or the record of that release
// the webhook kept in the rollout-history as the node was gated again says
// it converged — or that the node was down then, brought back up with the
// target it had (DESIGN §4's Recovery: every pod of it new). A node gated
// again for a change, then changed back to the target it was released
// for, is not Ready for many reasons: a crash after its rollout converged
// (a recovery), or a rollout still under way when the change came (not
// one). Only such a record tells them apart. A record kept by a webhook of
// an earlier version says nothing of convergence: the node is taken for a
// recovery, as that version did.
func (s *Snapshot) releaseConverged(name string) bool {
	n := s.Nodes[name]
	if s.recordedConverged(name) || s.SetsConverged[name] {
		return true
	}
	// Of the reasons that prove it, these two are never written for a
	// gated node: one not overwritten since the gate came back.
	if c := PrerequisitesCondition(n); c != nil && (c.Reason == v2alpha1.ReasonRolloutComplete || c.Reason == v2alpha1.ReasonRecovering) &&
		c.ObservedGeneration >= releasedGeneration(n) {
		return true
	}
	history := HistoryIn(n)
	if len(history) == 0 {
		return false
	}
	// The last record is of the latest release only if it was released
	// then: a record of an earlier release of the same target says
	// nothing of this one.
	last := history[len(history)-1]
	if last.Target != ReleasedTarget(n) || !last.Released.Equal(stamp(n, v2alpha1.AnnotationReleasedAt)) {
		return false
	}
	// Down counts for a node whose pods went with it: gated from the
	// moment it came back up, it has none until released. One whose
	// operator never took it down (up: false and back before it looked)
	// still runs what it ran, and is judged by that.
	return last.Converged == nil || *last.Converged || !last.Ready.IsZero() || last.Down && len(s.Pods[name]) == 0
}

// convergedAsStored reports whether released node n's own object records
// that the rollout of its latest release converged: its condition,
// observed at or after the release, has a reason written only once it did
// (inFlight), or its release recorded it (its own entry in
// released-after). What the rollout-history keeps of a rollout a change
// replaces.
func convergedAsStored(n v2alpha1.Node) bool {
	if c := PrerequisitesCondition(n); c != nil && slices.Contains(convergedReasons, c.Reason) && c.ObservedGeneration >= releasedGeneration(n) {
		return true
	}
	k := convergenceKey(n)
	return k != "" && carriesRecord(n, n.GetName(), k)
}

// convergedUnrecorded reports whether gated node name runs every pod
// Ready on the target of its latest release, as many as its StatefulSets
// want, no StatefulSet of it makes pods for another target, and nothing
// the cache shows records that release's rollout
// converged (Decision.RecordConverged). Its StatefulSet's record is left
// out: the cache has none, and a record written once stops the fresh reads
// the decision asks for.
func (s *Snapshot) convergedUnrecorded(name string) bool {
	n := s.Nodes[name]
	target := ReleasedTarget(n)
	if target == "" || convergenceKey(n) == "" || !s.isReady(name) ||
		slices.ContainsFunc(s.Pods[name], func(p Pod) bool { return p.Hash != target }) ||
		slices.ContainsFunc(s.SetTemplates[name], func(t Template) bool { return t.Hash != "" && t.Hash != target }) {
		// Not Ready on it, or a StatefulSet making pods for another
		// target: a rollout of it under way (fresh snapshots only).
		return false
	}
	withoutSets := *s
	withoutSets.SetsConverged = nil
	return !withoutSets.releaseConverged(name)
}

// inFlight reports whether the node is in a released rollout that has not
// converged yet: ungated, released for its current target, not Ready on it,
// and neither a condition since the release, a dependent's release
// (released-after) nor its StatefulSet (SetsConverged) says it converged. Such a rollout is
// finished before a predecessor that waits for it (see PodsMayStart), and
// the node is Ready for no one.
func (s *Snapshot) inFlight(name string) bool {
	n := s.Nodes[name]
	if !Live(n) || Gated(n) || StampedTarget(n) == "" || newTarget(n) || s.converged(name) || s.SetsConverged[name] {
		return false
	}
	c := PrerequisitesCondition(n)
	if c != nil && slices.Contains(convergedReasons, c.Reason) && c.ObservedGeneration >= releasedGeneration(n) {
		return false
	}
	return !s.recordedConverged(name)
}

// recovering reports whether a live, ungated node lost its Ready state (or
// its pods) on a target whose rollout had converged: a crash, an eviction, a
// node failure. Its recovery is ordered at the pods.
func (s *Snapshot) recovering(name string) bool {
	n := s.Nodes[name]
	return Live(n) && !Gated(n) && !s.converged(name) && !s.inFlight(name)
}
