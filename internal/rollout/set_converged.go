package rollout

import (
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// This file reads the record of convergence the StatefulSet controller
// keeps (DESIGN §2): pods vanish, a StatefulSet's status does not. The
// controller sets status.currentRevision to status.updateRevision only once
// every one of spec.replicas pods is updated and Ready at once
// (completeRollingUpdate) — and also when it cannot tell: a brand-new
// StatefulSet, a template rolled back to the current revision, a
// StatefulSet recreated under the same name (it adopts the old revisions),
// the current revision's history deleted. So the record is read against
// the one the node's release wrote (released-set-revision): the same
// StatefulSet, its currentRevision moved on since the release.

// setOf returns the one live StatefulSet whose pod template names node
// name, with at least one replica; false when there is none or more.
func setOf(sets []appsv1.StatefulSet, name string) (appsv1.StatefulSet, bool) {
	var out appsv1.StatefulSet
	found := 0
	for _, sts := range sets {
		if sts.Spec.Template.Labels[v2alpha1.LabelNode] == name && sts.DeletionTimestamp == nil {
			out = sts
			found++
		}
	}
	return out, found == 1 && ptr.Deref(out.Spec.Replicas, 1) >= 1
}

// setRevisions returns, by node name, what a release of the node records
// of its StatefulSet (released-set-revision):
// "<uid>@<generation>/<currentRevision>" of its one live StatefulSet with
// replicas, none for a node without one (releasedSet reads it back). The
// generation rides on the UID so that a sequencer of an earlier version,
// which reads "<uid>/<currentRevision>", finds another UID there and takes
// the StatefulSet for no record of the release, not for one whose
// revision moved on since it.
//
// The generation says that the StatefulSet's template makes what the node
// runs (templateUnmovedSinceRelease): it is recorded only where s shows
// that so — every pod of the node Ready, none missing, each carrying the
// template's target hash — and the controller has acted on that
// generation (status.observedGeneration). A StatefulSet's own status
// proves neither: a brand-new one (made again by another hand, adopting
// the pods) has equal revisions from the start, and one whose controller
// has not acted on its spec names an earlier template's revision while it
// makes the new template's pods (it writes its status after them). Without
// it the record reads as an earlier version's: no generation, no recovery
// of that kind.
func setRevisions(sets []appsv1.StatefulSet, s *Snapshot) map[string]string {
	var out map[string]string
	for name := range s.Nodes {
		sts, ok := setOf(sets, name)
		if !ok || sts.Status.CurrentRevision == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		set := string(sts.UID)
		if sts.Status.ObservedGeneration == sts.Generation && s.runsWhole(name, sts.Spec.Template.Labels[v2alpha1.LabelTargetHash]) {
			set += "@" + strconv.FormatInt(sts.Generation, 10)
		}
		out[name] = set + "/" + sts.Status.CurrentRevision
	}
	return out
}

// runsWhole reports whether node name is Ready with every pod of target
// hash.
func (s *Snapshot) runsWhole(name, hash string) bool {
	return hash != "" && s.isReady(name) && !slices.ContainsFunc(s.Pods[name], func(p Pod) bool { return p.Hash != hash })
}

// recordsConvergence reports whether StatefulSet sts says that node n's
// released rollout converged: it is the StatefulSet the release recorded
// (same UID), its currentRevision has moved on since to equal its
// updateRevision, its controller has observed its latest spec, and its pod
// template carries the node's target hash. A StatefulSet whose update
// strategy never completes a rollout (OnDelete) or completes only part of it
// (a partition) records nothing.
func recordsConvergence(sts appsv1.StatefulSet, n v2alpha1.Node) bool {
	hash := StampedTarget(n)
	if hash == "" || sts.Spec.Template.Labels[v2alpha1.LabelTargetHash] != hash || sts.Status.ObservedGeneration != sts.Generation {
		return false
	}
	strategy := sts.Spec.UpdateStrategy
	if strategy.Type != "" && strategy.Type != appsv1.RollingUpdateStatefulSetStrategyType ||
		strategy.RollingUpdate != nil && ptr.Deref(strategy.RollingUpdate.Partition, 0) > 0 {
		return false
	}
	current := sts.Status.CurrentRevision
	at, ok := releasedSet(n)
	return ok && at.uid == string(sts.UID) && at.revision != current && current != "" && current == sts.Status.UpdateRevision
}

// setAtRelease is what a node's latest release recorded of its StatefulSet
// (released-set-revision).
type setAtRelease struct {
	uid, revision string
	// generation is 0 where the release recorded none (an earlier version
	// of the sequencer wrote "<uid>/<currentRevision>").
	generation int64
}

// releasedSet reads node n's released-set-revision; false where it has
// none.
func releasedSet(n v2alpha1.Node) (setAtRelease, bool) {
	set, revision, ok := strings.Cut(n.GetAnnotations()[v2alpha1.AnnotationReleasedSetRevision], "/")
	if !ok {
		return setAtRelease{}, false
	}
	at := setAtRelease{uid: set, revision: revision}
	if uid, gen, hasGen := strings.Cut(set, "@"); hasGen {
		at.uid = uid
		at.generation, _ = strconv.ParseInt(gen, 10, 64)
	}
	return at, true
}

// setsConverged returns the nodes of s in flight (released, not Ready on
// target, no record of the sequencer's own that they converged), or gated
// again on the target they were released for, whose pods
// all carry their target (those that exist) and whose StatefulSet records
// that their released rollout converged (recordsConvergence).
func setsConverged(s *Snapshot, sets []appsv1.StatefulSet) map[string]bool {
	var out map[string]bool
	for name, n := range s.Nodes {
		// A node gated again on the target it was released for (a change
		// reverted before its release) is read as one in flight would be.
		again := Live(n) && Gated(n) && StampedTarget(n) != "" && !newTarget(n) && !s.runsAnotherTarget(name)
		if !again && (!s.inFlight(name) || !s.onTarget(name)) {
			continue
		}
		if sts, ok := setOf(sets, name); ok && recordsConvergence(sts, n) {
			if out == nil {
				out = map[string]bool{}
			}
			out[name] = true
		}
	}
	return out
}
