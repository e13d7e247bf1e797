package audit

import (
	"slices"
	"sort"
	"time"
)

// NodeKey names an Express node.
type NodeKey struct{ Namespace, Name string }

// String is namespace/name.
func (k NodeKey) String() string { return k.Namespace + "/" + k.Name }

// NodeSeen is what one stored version of a node says, as far as the order
// goes.
type NodeSeen struct {
	Kind, UID string
	// Held: the sequencer's gate is on the node (enforce), or, in audit
	// mode, the sequencer's plan has not let its target go yet (its target
	// hash is not its released-target).
	Held bool
	// Audit: the namespace is in audit mode; a hold is the plan's, not a
	// gate.
	Audit bool
	// Target is the node's target hash.
	Target string
	// Key is its target as pods on the contract's fallback carry it (no
	// target-hash label): its version and revision (SpecKey).
	Key string
	// Released is the target the sequencer last released the node for (its
	// released-target): the Express operator may still be carrying it out
	// when a new target gates the node, from a cache that has not seen the
	// gate yet.
	Released string
	// Waiting is the node's PrerequisitesReady message: what it waits for.
	Waiting string
	// ReleasedAt is when the sequencer released the node (or, in audit,
	// when its plan would have): its released-at annotation.
	ReleasedAt time.Time
	// Gone: the node was deleted.
	Gone bool
	// Live: the node is up and not being deleted.
	Live bool
	// Gated: the sequencer's gate is on this version, whatever the mode
	// (the mode is read as the auditor handles the version, and may lag).
	Gated bool
}

// PodSeen is a pod of a node, as created.
type PodSeen struct {
	Node NodeKey
	Name string
	UID  string
	// Target is what the pod was made for: its target-hash label, or its
	// version and revision labels (TargetKey).
	Target string
	// FromSet: the pod's controller is a StatefulSet, called Set.
	FromSet bool
	Set     string
	// Revision is the StatefulSet revision the pod was made from (its
	// controller-revision-hash label).
	Revision string
	// WouldHold is, in audit mode, what the pod webhook said the pod would
	// have waited for, scheduling-gated, had the namespace enforced (its
	// would-hold annotation); empty when it would have started at once.
	WouldHold string
	// Created is its creationTimestamp: for messages and durations only,
	// never for the order.
	Created time.Time
}

// SetSeen is one stored version of a StatefulSet of a node.
type SetSeen struct {
	Node NodeKey
	Name string
	// Target is what its pod template makes pods for (TargetKey).
	Target string
	// Current and Update are its status's currentRevision and
	// updateRevision: mid-roll (they differ), a pod its controller makes
	// up at the current revision is one of what the node ran before the
	// roll, whatever its template says now.
	Current, Update string
	// Unobserved: its controller has not yet acted on this version's spec
	// (status.observedGeneration behind metadata.generation): its
	// revisions are of an earlier template, not of this one.
	Unobserved bool
	Gone       bool
}

// Finding kinds: the kind label of express_sequencer_order_violations_total,
// and would-have-held.
const (
	// KindRolledWhileGated: a StatefulSet created a pod for a target the
	// node did not run when it was gated, while it was gated: the Express
	// operator rolled a gated node.
	KindRolledWhileGated = "rolled-while-gated"
	// KindPodWhileGated: a pod no StatefulSet controls was created for such
	// a target while the node was gated: made by hand, or by a controller
	// outside the contract.
	KindPodWhileGated = "pod-while-gated"
	// KindWouldHaveHeld: in audit mode, the node's new target started while
	// the sequencer's plan would still have held it.
	KindWouldHaveHeld = "would-have-held"
)

// Why a pod creation was not judged: the why label of
// express_sequencer_audit_unjudged_pods_total.
const (
	// UnjudgedRelisted: first seen already changed — after a broken watch
	// was listed again, or labelled into an Express node since: its
	// creation cannot be placed in the order.
	UnjudgedRelisted = "relisted"
	// UnjudgedBlind: created while its node was held, in revisions a broken
	// watch may have hidden.
	UnjudgedBlind = "blind"
)

// Finding is a rollout the auditor found out of order (or, in audit, one
// enforcing would have held).
type Finding struct {
	Kind     string
	Node     NodeKey
	NodeKind string
	// Pod is the pod made while the node was held (the first, for a
	// would-have-held).
	Pod string
	// Target is what the pod was made for.
	Target string
	// Ran are the targets the node's pods and StatefulSet template ran
	// when the hold began.
	Ran []string
	// HeldAt and CreatedAt are the API server's revisions of the hold's
	// start and of the pod's creation: HeldAt < CreatedAt.
	HeldAt, CreatedAt uint64
	// Started is the pod's creationTimestamp.
	Started time.Time
	// Waiting is what the node waited for when the pod was created.
	Waiting string
	// HeldFor is, for a would-have-held, how long enforcing would have held
	// the node after its pod started: until the plan let it go (0 while it
	// has not; Open says so).
	HeldFor time.Duration
	// ReleasedAt is when the plan let the node go, for a would-have-held.
	ReleasedAt time.Time
	// Recovery: a would-have-held of a recovering node's new pod, which
	// enforcing would have created scheduling-gated (Pod is that pod), not
	// of a new target.
	Recovery bool
}

// Judge tells, from what the API server stored and in the order it stored
// it (resource versions), which pods were created while their node was
// held. It never plans: it reads the hold off the node (the gate, or in
// audit the released-target the plan wrote) and what ran off the pods and
// StatefulSets. It is fed in any order across kinds (each kind's watch
// delivers its own in order) and judges a pod only once the caller says
// everything up to the pod's revision is known of its node and sets.
type Judge struct {
	// Grace: in audit, a target that started less than this before the
	// plan let its node go is not a would-have-held — enforcing would have
	// released it as soon, within the sequencer's reaction time.
	Grace time.Duration
	// PodsThrough is the revision the pods' watch has been handled
	// through: a pod created before it may still arrive, and the node
	// versions it would be judged on are kept.
	PodsThrough uint64
	// blind are spans of revisions a broken watch may have hidden: no pod
	// created in one is judged.
	blind   []blindSpan
	nodes   map[NodeKey]*nodeLog
	pods    map[NodeKey][]podLife
	sets    map[NodeKey]map[string][]setRev
	pending []pendingPod
	// open are would-have-helds waiting for the plan to let their node go.
	open map[NodeKey]*Finding
	// openPods are would-have-helds of recoveries, waiting for the plan to
	// let their pod go: one per node at a time.
	openPods map[NodeKey]*Finding
	// reported are the hold runs a would-have-held was found in, per node.
	reported map[NodeKey]uint64
	// tombs are the nodes forgotten gone whose pods or StatefulSets the
	// judge still keeps (their objects not yet seen deleted: the garbage
	// collector has yet to reach them, or they were orphaned): a node of
	// the name seen next is another object, born then (nodeRev.bornAt),
	// however the settles fell between its predecessor's deletion and it.
	tombs map[NodeKey]bool
	// Blinded counts the pods created while their node was held, in a span
	// a broken watch may have hidden: not judged, for the node's state then
	// is not known.
	Blinded uint64
}

// blindSpan is the revisions (from, to] a broken watch of stream may have
// hidden, mended by a list at revision to. It is done once the stream's
// handler has processed an event past to: every object of the list before
// it.
type blindSpan struct {
	stream   string
	from, to uint64
	done     bool
}

type nodeRev struct {
	rv   uint64
	seen NodeSeen
	// heldSince is the revision the node's current run of holds began at
	// (0 when not held).
	heldSince uint64
	// heldReleased is the node's released-target when that hold began:
	// what the Express operator may still carry out from a cache that has
	// not seen the gate — its hash, and its fallback key where a version of
	// the node on that target was seen. Kept with every version of the
	// hold, for the version it began at may be pruned before a pod of the
	// hold is judged.
	heldReleased []string
	// heldUngated is the target a live node carried, ungated and not
	// released, in the version just before its hold began, where the hold
	// did not change it: a switch from audit to enforce gated the node
	// where it stood. The Express operator, free to roll it a moment
	// before, may still carry it out from a cache that has not seen the
	// gate; the pod webhook creates what it makes held (sequencer.md,
	// "Races the design accepts"). Its hash only: pods on the contract's
	// fallback (no target-hash label) are not held so, and a roll of
	// theirs in that instant is counted. A node brought up gated is not
	// this: down, the operator was not free to provision it.
	heldUngated []string
	// releasedKey is the fallback key of the node's last version seen
	// released and on its target (the hash it was released for, then the
	// key), carried to every later version: a hold that begins takes it
	// where it names the target released then.
	releasedKey [2]string
	// bornAt is the revision this object (its UID) was first seen at, where
	// an earlier object of the same name was seen before it (deleted and
	// made again); 0 otherwise. Pods made before it were the earlier
	// object's: they are not what this one ran.
	bornAt uint64
}

type nodeLog struct{ revs []nodeRev }

type podLife struct {
	name, uid, target string
	// set and revision: the StatefulSet that made it and the revision it
	// was made from (FromSet only).
	set, revision    string
	created, deleted uint64 // 0: before the auditor's view / not deleted
	// started is its creation time (metadata.creationTimestamp).
	started time.Time
	// letGo is, for a pod enforcing would have held, when the plan would
	// have let it go (zero while it has not).
	letGo time.Time
}

type setRev struct {
	rv              uint64
	target          string
	current, update string
	// currentTarget is what the current revision's template made pods
	// for, where the judge saw it (currentTargetOf); "" where it did not.
	currentTarget string
	unobserved    bool
	gone          bool
}

type pendingPod struct {
	rv  uint64
	pod PodSeen
}

// NewJudge returns a judge that has seen nothing.
func NewJudge() *Judge {
	return &Judge{nodes: map[NodeKey]*nodeLog{}, pods: map[NodeKey][]podLife{}, sets: map[NodeKey]map[string][]setRev{},
		open: map[NodeKey]*Finding{}, openPods: map[NodeKey]*Finding{}, reported: map[NodeKey]uint64{}, tombs: map[NodeKey]bool{}}
}

// Node records node k as stored at revision rv. Revisions of one node come
// in order; an older one than the last is ignored.
func (j *Judge) Node(rv uint64, k NodeKey, seen NodeSeen) {
	var since, born uint64
	l := j.nodes[k]
	if l == nil {
		l = &nodeLog{}
		j.nodes[k] = l
		if j.tombs[k] {
			born = rv // made again after a node of its name was forgotten gone
			delete(j.tombs, k)
		}
	}
	var released, ungated []string
	var releasedKey [2]string
	var before *NodeSeen // the version just before this one, where none may be missing between
	if n := len(l.revs); n > 0 {
		last := l.revs[n-1]
		if rv <= last.rv {
			return
		}
		since, released, ungated, born, releasedKey = last.heldSince, last.heldReleased, last.heldUngated, last.bornAt, last.releasedKey
		if last.seen.UID != seen.UID {
			born = rv // deleted and made again under the same name
		}
		// Another object or mode is a new hold; so is another target in
		// audit, where the hold is the plan's for that target. A gate is
		// one hold however the target changes under it: a target the
		// operator rolled while gated, then reverted, is still not what
		// ran when the gate was added.
		if last.seen.UID != seen.UID || last.seen.Audit != seen.Audit || seen.Audit && last.seen.Target != seen.Target {
			since = 0
		}
		if j.blindBetween(last.rv, rv) {
			// Versions between them may be missing: the hold may have ended
			// and begun again for what ran since. It counts from here.
			since = 0
		} else if last.seen.UID == seen.UID {
			before = &last.seen
		}
	}
	if !seen.Held && !seen.Gone && seen.Released != "" && seen.Released == seen.Target && seen.Key != "" {
		releasedKey = [2]string{seen.Target, seen.Key}
	}
	if !seen.Held || seen.Gone {
		since, released, ungated = 0, nil, nil
	} else if since == 0 {
		since, released, ungated = rv, nil, nil
		if seen.Released != "" {
			released = []string{seen.Released}
			if releasedKey[0] == seen.Released {
				released = append(released, releasedKey[1])
			}
		}
		if before != nil && before.Live && !before.Gone && !before.Gated && !seen.Audit &&
			before.Target != "" && before.Target == seen.Target && before.Released != before.Target {
			ungated = []string{seen.Target}
		}
	}
	l.revs = append(l.revs, nodeRev{rv: rv, seen: seen, heldSince: since, heldReleased: released, heldUngated: ungated, releasedKey: releasedKey, bornAt: born})
}

// Knows reports whether the judge keeps versions of node k (a node it
// forgot, gone, it knows no more).
func (j *Judge) Knows(k NodeKey) bool { return j.nodes[k] != nil }

// LastNode is the revision of the last version of k recorded, and whether
// that version says it is gone.
func (j *Judge) LastNode(k NodeKey) (uint64, bool) {
	l := j.nodes[k]
	if l == nil || len(l.revs) == 0 {
		return 0, true
	}
	last := l.revs[len(l.revs)-1]
	return last.rv, last.seen.Gone
}

// PodCreated records pod p, created at revision rv; rv 0 is a pod that
// existed before the auditor's view (or whose creation it cannot place),
// which counts as running and is never judged.
func (j *Judge) PodCreated(rv uint64, p PodSeen) {
	lives := j.pods[p.Node]
	if slices.ContainsFunc(lives, func(l podLife) bool { return l.name == p.Name && l.deleted == 0 }) {
		return
	}
	j.pods[p.Node] = append(lives, lifeOf(rv, p))
	if rv > 0 {
		j.pending = append(j.pending, pendingPod{rv: rv, pod: p})
		return
	}
	// Made before the auditor's view: what its revision made, for the
	// versions of its StatefulSet that did not say (currentTargetOf).
	for i, r := range j.sets[p.Node][p.Set] {
		if p.FromSet && p.Revision != "" && r.current == p.Revision && r.currentTarget == "" {
			j.sets[p.Node][p.Set][i].currentTarget = p.Target
		}
	}
}

// FoundUnderWay opens, once the auditor's first lists are fed, the
// would-have-helds they show under way: a node in audit, held as listed —
// the plan has not let its target go — with a pod of that target made
// before the auditor's view. The pod could be made only once the target
// was the node's, and the node has been held for it since, so it started
// while the plan held the node, as a pod judged on its creation would
// have shown: after a restart, or with another replica leading, the open
// would-have-helds the lists can show are kept (docs/operations.md says
// which they cannot). It ends as any does (letGo). Only a pod with the
// target-hash label counts: on the contract's fallback a pod's version and
// revision are those of the target before a config-only change too. And
// only a pod made since the node's last release (its released-at): the
// held target came after that release, and so did every pod started
// ahead of the plan for it, where a pod of the held target made before it
// is left from before a revert (the target released once, rolled away
// from, then back), which a judge that saw the hold begin counts as run.
// One its StatefulSet made up from such a target after that release is
// what the lists cannot tell apart: it is taken for one started ahead.
func (j *Judge) FoundUnderWay() {
	for k, l := range j.nodes {
		if len(l.revs) == 0 || j.open[k] != nil {
			continue
		}
		first := l.revs[0]
		if first.heldSince == 0 || !first.seen.Audit || first.seen.Gone || j.reported[k] == first.heldSince {
			continue
		}
		// The earliest such pod: a StatefulSet rolls from its last ordinal
		// down, so list order (by name) is not the order they started in.
		var p podLife
		for _, l := range j.pods[k] {
			if l.created == 0 && l.deleted == 0 && l.target == first.seen.Target && madeSince(l.started, first.seen.ReleasedAt) &&
				(p.name == "" || l.started.Before(p.started)) {
				p = l
			}
		}
		if p.name == "" {
			continue
		}
		j.reported[k] = first.heldSince
		j.open[k] = &Finding{Kind: KindWouldHaveHeld, Node: k, NodeKind: first.seen.Kind, Pod: p.name, Target: p.target,
			HeldAt: first.heldSince, CreatedAt: first.heldSince, Started: p.started, Waiting: first.seen.Waiting}
	}
}

// madeSince reports whether a pod created at created (kube-apiserver's
// clock, in whole seconds) may have been made after a release at released
// (the sequencer's clock): not before its second. Never released, any.
func madeSince(created, released time.Time) bool {
	return released.IsZero() || !created.Before(released.Truncate(time.Second))
}

// lifeOf is the life of pod p, created at rv.
func lifeOf(rv uint64, p PodSeen) podLife {
	l := podLife{name: p.Name, uid: p.UID, target: p.Target, created: rv, started: p.Created}
	if p.FromSet {
		l.set, l.revision = p.Set, p.Revision
	}
	return l
}

// PodMoved records pod p, relabelled to its node at revision rv: it runs
// there from then on, made before its node could order it, and is not
// judged.
func (j *Judge) PodMoved(rv uint64, p PodSeen) {
	lives := j.pods[p.Node]
	if slices.ContainsFunc(lives, func(l podLife) bool { return l.name == p.Name && l.deleted == 0 }) {
		return
	}
	j.pods[p.Node] = append(lives, lifeOf(rv, p))
}

// PodLetGo records that the plan would have let pod name (uid) of node k
// go at time at (its would-release-at annotation); the first time counts.
func (j *Judge) PodLetGo(k NodeKey, name, uid string, at time.Time) {
	for i, l := range j.pods[k] {
		if l.name == name && l.uid == uid && l.deleted == 0 && l.letGo.IsZero() {
			j.pods[k][i].letGo = at
		}
	}
}

// PodDeleted records that pod name of node k was deleted at revision rv.
func (j *Judge) PodDeleted(rv uint64, k NodeKey, name string) {
	for i, l := range j.pods[k] {
		if l.name == name && l.deleted == 0 {
			j.pods[k][i].deleted = rv
		}
	}
}

// Blind records that revisions (from, to] of stream may be missing from
// what the judge was fed (its watch broke and a list at revision to mends
// it): a pod created among them is not judged, for the node's state then
// is not known, and a node's hold seen on both sides of them counts from
// after them.
func (j *Judge) Blind(stream string, from, to uint64) {
	if to > from {
		j.blind = append(j.blind, blindSpan{stream: stream, from: from, to: to})
	}
}

// CloseBlind marks done the blind spans whose stream's handler has
// processed an event past them (handled): the list that mends each has
// been fed whole. Only a span done may be forgotten.
func (j *Judge) CloseBlind(handled func(stream string) uint64) {
	for i := range j.blind {
		if !j.blind[i].done && handled(j.blind[i].stream) > j.blind[i].to {
			j.blind[i].done = true
		}
	}
}

// blindBetween reports whether revisions between from and to may be
// missing.
func (j *Judge) blindBetween(from, to uint64) bool {
	return slices.ContainsFunc(j.blind, func(b blindSpan) bool { return b.from < to && b.to > from })
}

func (j *Judge) inBlind(rv uint64) bool {
	return slices.ContainsFunc(j.blind, func(b blindSpan) bool { return rv > b.from && rv <= b.to })
}

// Pending is how many pod creations wait to be judged.
func (j *Judge) Pending() int { return len(j.pending) }

// Waiting returns the pod creations not judged yet whose node is not
// known through their revision, each with the revision it must be known
// through.
func (j *Judge) Waiting(known func(NodeKey) uint64) map[NodeKey]uint64 {
	out := map[NodeKey]uint64{}
	for _, p := range j.pending {
		if known(p.pod.Node) < p.rv && p.rv > out[p.pod.Node] {
			out[p.pod.Node] = p.rv
		}
	}
	return out
}

// Settle judges every pending pod creation whose node (and its
// StatefulSets) known says is known through its revision, finishes the
// would-have-helds whose node the plan has let go since, and forgets what
// no judgement can need any more. It returns what it found, in the order
// the API server stored the pods.
func (j *Judge) Settle(known func(NodeKey) uint64) []Finding {
	sort.SliceStable(j.pending, func(a, b int) bool { return j.pending[a].rv < j.pending[b].rv })
	var out []Finding
	rest := j.pending[:0]
	for _, p := range j.pending {
		if known(p.pod.Node) < p.rv {
			rest = append(rest, p)
			continue
		}
		if f := j.openPods[p.pod.Node]; f != nil {
			// A recovery's pod deleted before this one was made ends its
			// finding first, however the judgements fell in time.
			if done, ok := j.podLetGo(p.pod.Node, f); ok && j.deletedBy(p.pod.Node, f, p.rv) {
				delete(j.openPods, p.pod.Node)
				if j.reportable(done) {
					out = append(out, done)
				}
			}
		}
		if f, ok := j.judge(p); ok {
			switch {
			case f.Recovery:
				j.openPods[f.Node] = &f
			case f.Kind == KindWouldHaveHeld:
				if prev := j.open[f.Node]; prev != nil {
					// A hold of an earlier target, judged in the same pass:
					// the new hold ended it, so it ends here, before this
					// one takes its place. One whose node's versions show
					// it going on (a blind span between: stillHeld) goes
					// on, and the new finding is its own again.
					done, ok := j.letGo(f.Node, prev)
					if !ok {
						continue
					}
					if j.reportable(done) {
						out = append(out, done)
					}
				}
				j.open[f.Node] = &f
			default:
				out = append(out, f)
			}
		}
	}
	j.pending = rest
	for _, open := range []struct {
		findings map[NodeKey]*Finding
		end      func(NodeKey, *Finding) (Finding, bool)
	}{{j.open, j.letGo}, {j.openPods, j.podLetGo}} {
		for k, f := range open.findings {
			if done, ok := open.end(k, f); ok {
				delete(open.findings, k)
				if j.reportable(done) {
					out = append(out, done)
				}
			}
		}
	}
	j.prune()
	return out
}

// judge decides one pod creation.
func (j *Judge) judge(p pendingPod) (Finding, bool) {
	at, ok := j.nodeAt(p.pod.Node, p.rv)
	if !ok {
		return Finding{}, false
	}
	if at.heldSince == 0 {
		return j.recovery(p, at)
	}
	if j.inBlind(p.rv) {
		j.Blinded++
		return Finding{}, false
	}
	born := at.bornAt
	if len(at.heldReleased) > 0 {
		// Released since it was made again: what its pods and StatefulSets
		// run, adopted or not, is its own.
		born = 0
	}
	ran := j.ranAt(p.pod.Node, at.heldSince, born)
	for _, carried := range slices.Concat(at.heldReleased, at.heldUngated) {
		if !slices.Contains(ran, carried) {
			// Released before the hold, or carried ungated right before it:
			// the operator may be carrying it out from a cache that has not
			// seen the new gate yet.
			ran = append(ran, carried)
			sort.Strings(ran)
		}
	}
	if slices.Contains(ran, p.pod.Target) || j.madeUpAtUnknownCurrent(p, at.heldSince, born) {
		return Finding{}, false // what the node already ran: a StatefulSet making up a lost pod
	}
	f := Finding{Node: p.pod.Node, NodeKind: at.seen.Kind, Pod: p.pod.Name, Target: p.pod.Target, Ran: ran,
		HeldAt: at.heldSince, CreatedAt: p.rv, Started: p.pod.Created, Waiting: at.seen.Waiting}
	switch {
	case at.seen.Audit:
		if j.reported[p.pod.Node] == at.heldSince {
			return Finding{}, false // one per hold: its first pod
		}
		j.reported[p.pod.Node] = at.heldSince
		f.Kind = KindWouldHaveHeld
	case p.pod.FromSet:
		f.Kind = KindRolledWhileGated
	default:
		f.Kind = KindPodWhileGated
	}
	return f, true
}

// recovery decides a pod created while its node was not held: in audit
// mode, one the pod webhook would have created scheduling-gated starts a
// would-have-held of the recovery, finished when the plan would have let
// the pod go (podLetGo). One per node at a time: its first such pod.
func (j *Judge) recovery(p pendingPod, at nodeRev) (Finding, bool) {
	if p.pod.WouldHold == "" || !at.seen.Audit || at.seen.Gone {
		return Finding{}, false
	}
	if j.inBlind(p.rv) {
		j.Blinded++
		return Finding{}, false
	}
	if j.openPods[p.pod.Node] != nil {
		return Finding{}, false
	}
	return Finding{Kind: KindWouldHaveHeld, Recovery: true, Node: p.pod.Node, NodeKind: at.seen.Kind, Pod: p.pod.Name, Target: p.pod.Target,
		CreatedAt: p.rv, Started: p.pod.Created, Waiting: p.pod.WouldHold}, true
}

// podLetGo finishes the would-have-held of a recovery f once its pod is let
// go by the plan; or, its end not to be recorded, once the pod is deleted or
// its node leaves audit mode first.
func (j *Judge) podLetGo(k NodeKey, f *Finding) (Finding, bool) {
	i := slices.IndexFunc(j.pods[k], func(l podLife) bool { return l.name == f.Pod && l.created == f.CreatedAt })
	if i < 0 {
		return *f, true // forgotten with its node
	}
	l := j.pods[k][i]
	done := *f
	switch {
	case !l.letGo.IsZero():
		done.ReleasedAt = l.letGo
		if d := l.letGo.Sub(f.Started); d > 0 {
			done.HeldFor = d
		}
		return done, true
	case l.deleted != 0:
		return done, true
	}
	if n := j.nodes[k]; n != nil && len(n.revs) > 0 {
		if last := n.revs[len(n.revs)-1]; !last.seen.Audit || last.seen.Gone {
			return done, true
		}
	}
	return Finding{}, false
}

// reportable reports whether a finished would-have-held is reported: its
// hold, where its end is known, lasted the grace or more.
func (j *Judge) reportable(done Finding) bool {
	return done.ReleasedAt.IsZero() || done.HeldFor >= j.Grace
}

// deletedBy reports whether the pod of recovery f was deleted at or before
// revision rv.
func (j *Judge) deletedBy(k NodeKey, f *Finding, rv uint64) bool {
	i := slices.IndexFunc(j.pods[k], func(l podLife) bool { return l.name == f.Pod && l.created == f.CreatedAt })
	return i >= 0 && j.pods[k][i].deleted != 0 && j.pods[k][i].deleted <= rv
}

// letGo finishes would-have-held f once the node's log shows its hold
// ended: how long enforcing would have held it. A node's versions come in
// order, so the first that ends the hold is the end, whatever the other
// kinds' watches have delivered.
func (j *Judge) letGo(k NodeKey, f *Finding) (Finding, bool) {
	l := j.nodes[k]
	if l == nil {
		return *f, true
	}
	waiting := f.Waiting
	var hold NodeSeen // the node as its hold began
	for _, r := range l.revs {
		if r.heldSince == f.HeldAt && hold.UID == "" {
			hold = r.seen
		}
		if r.rv <= f.CreatedAt || r.heldSince == f.HeldAt || stillHeld(hold, r.seen) {
			if (r.heldSince == f.HeldAt || stillHeld(hold, r.seen)) && r.seen.Waiting != "" {
				waiting = r.seen.Waiting // what it waited for last: the hold the release ended
			}
			continue
		}
		done := *f
		done.Waiting = waiting
		// Ended by a release of the target the pod started on: the node's
		// released-target is its target. A hold can end without one — the
		// node taken down or deleted, its target changed — and its
		// released-at then dates an earlier release, before the pod.
		released := r.seen.Released != "" && r.seen.Released == r.seen.Target
		if !r.seen.Gone && released && (r.seen.Target == f.Target || r.seen.Key == f.Target) && !r.seen.ReleasedAt.IsZero() {
			done.ReleasedAt = r.seen.ReleasedAt
			if d := r.seen.ReleasedAt.Sub(f.Started); d > 0 {
				done.HeldFor = d
			}
		}
		return done, true
	}
	return Finding{}, false
}

// stillHeld reports whether version seen of a node is the same hold as
// hold, the node as that hold began, though the judge counts a new one
// from it (a blind span between them): the same object, still held in
// audit for the same target, with the same release recorded — every
// release writes its own released-at, so none came between.
func stillHeld(hold, seen NodeSeen) bool {
	return hold.UID != "" && seen.Held && seen.Audit && hold.Audit && !seen.Gone && seen.UID == hold.UID &&
		seen.Target == hold.Target && seen.Released == hold.Released && seen.ReleasedAt.Equal(hold.ReleasedAt)
}

// nodeAt is the version of node k stored last at or before revision rv.
func (j *Judge) nodeAt(k NodeKey, rv uint64) (nodeRev, bool) {
	l := j.nodes[k]
	if l == nil {
		return nodeRev{}, false
	}
	i := sort.Search(len(l.revs), func(i int) bool { return l.revs[i].rv > rv })
	if i == 0 {
		return nodeRev{}, false
	}
	return l.revs[i-1], true
}

// ranAt are the targets node k's pods and StatefulSet templates ran at
// revision rv — a StatefulSet mid-roll also what its current revision
// makes (currentTargetOf), judged by the revisions it reported, not by a
// pod's own revision label, which a pod made by hand copies — sorted; only pods made, and StatefulSet versions stored, at
// or after born (the node's object first seen then, an earlier one of its
// name deleted): a pod or StatefulSet of the earlier object, still there
// until the garbage collector removes it, is not what this one ran.
func (j *Judge) ranAt(k NodeKey, rv, born uint64) []string {
	seen := map[string]bool{}
	for _, l := range j.pods[k] {
		if l.created < rv && (l.deleted == 0 || l.deleted > rv) && (born == 0 || l.created >= born) {
			seen[l.target] = true
		}
	}
	for _, revs := range j.sets[k] {
		if at := setAt(revs, rv); at != nil && !at.gone && (born == 0 || at.rv >= born) {
			seen[at.target] = true
			// Mid-roll, the StatefulSet makes a pod it has not rolled yet
			// (one lost and made up) from its current revision: what the
			// node ran before the roll, whatever its template says.
			if at.currentTarget != "" {
				seen[at.currentTarget] = true
			}
		}
	}
	out := make([]string, 0, len(seen))
	for t := range seen {
		out = append(out, t)
	}
	sort.Strings(out)
	return out
}

// prune forgets, per node, what no pending judgement and no later one can
// read: node versions before the one a pending pod (or the present) needs,
// pods deleted and StatefulSet versions replaced before the hold that
// version belongs to began.
func (j *Judge) prune() {
	oldest := map[NodeKey]uint64{}
	if j.PodsThrough > 0 {
		for k := range j.nodes {
			oldest[k] = j.PodsThrough
		}
	}
	for _, p := range j.pending {
		if o, ok := oldest[p.pod.Node]; !ok || p.rv < o {
			oldest[p.pod.Node] = p.rv
		}
	}
	for k, f := range j.open {
		if o, ok := oldest[k]; !ok || f.CreatedAt < o {
			oldest[k] = f.CreatedAt
		}
	}
	blind := j.blind[:0]
	for _, b := range j.blind {
		if !b.done || b.to >= j.PodsThrough || slices.ContainsFunc(j.pending, func(p pendingPod) bool { return p.rv <= b.to }) {
			blind = append(blind, b)
		}
	}
	j.blind = blind
	for k, l := range j.nodes {
		keepFrom := len(l.revs) - 1
		if o, ok := oldest[k]; ok {
			keepFrom = sort.Search(len(l.revs), func(i int) bool { return l.revs[i].rv > o }) - 1
		}
		if keepFrom < 0 {
			keepFrom = 0
		}
		l.revs = l.revs[keepFrom:]
		if len(l.revs) == 0 {
			continue
		}
		if o, ok := oldest[k]; (!ok || o > l.revs[0].rv) && len(l.revs) == 1 && l.revs[0].seen.Gone {
			// Its pods and StatefulSets are forgotten as they go
			// (pruneNodeless); until then a node of the name is born anew.
			delete(j.nodes, k)
			delete(j.reported, k)
			j.tombs[k] = true
			continue
		}
		floor := l.revs[0].rv
		if l.revs[0].heldSince != 0 {
			floor = l.revs[0].heldSince
		}
		// A pod deleted is read only where it was alive at the start of a
		// hold a judgement may still need (ranAt), or by a recovery's
		// open finding: one made and deleted within a hold, again and
		// again (a StatefulSet making up a pod lost in a loop), is not.
		var starts []uint64
		for _, r := range l.revs {
			if r.heldSince != 0 {
				starts = append(starts, r.heldSince)
			}
		}
		open := j.openPods[k]
		lives := j.pods[k][:0]
		for _, p := range j.pods[k] {
			alive := slices.ContainsFunc(starts, func(h uint64) bool { return p.created < h && p.deleted > h })
			if p.deleted == 0 || p.deleted >= floor && alive || open != nil && open.Pod == p.name && open.CreatedAt == p.created {
				lives = append(lives, p)
			}
		}
		j.pods[k] = lives
		for name, revs := range j.sets[k] {
			from := 0
			for i := range revs {
				if revs[i].rv <= floor {
					from = i
				}
			}
			revs = revs[from:]
			if len(revs) == 1 && revs[0].gone && revs[0].rv < floor {
				delete(j.sets[k], name)
				continue
			}
			j.sets[k][name] = revs
		}
	}
	j.pruneNodeless()
}

// pruneNodeless forgets, of nodes the judge keeps no version of (gone and
// forgotten, or never seen), the StatefulSets gone and the pods deleted
// that no pending judgement waits on: a StatefulSet's deletion handled
// after its node was forgotten would otherwise be kept for ever.
func (j *Judge) pruneNodeless() {
	waited := map[NodeKey]bool{}
	for _, p := range j.pending {
		waited[p.pod.Node] = true
	}
	for k, bySet := range j.sets {
		if j.nodes[k] != nil || waited[k] {
			continue
		}
		for name, revs := range bySet {
			if n := len(revs); n > 0 && revs[n-1].gone {
				delete(bySet, name)
			}
		}
		if len(bySet) == 0 {
			delete(j.sets, k)
		}
	}
	for k, lives := range j.pods {
		if j.nodes[k] != nil || waited[k] {
			continue
		}
		lives = slices.DeleteFunc(lives, func(l podLife) bool { return l.deleted != 0 })
		if len(lives) == 0 {
			delete(j.pods, k)
		} else {
			j.pods[k] = lives
		}
	}
	for k := range j.tombs {
		if j.pods[k] == nil && j.sets[k] == nil {
			delete(j.tombs, k)
		}
	}
}
