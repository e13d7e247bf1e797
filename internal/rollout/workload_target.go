package rollout

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// This file reads which target a node's workload was made for. A release
// records the target released (released-target), not what the node runs:
// a release the Express operator has not carried out yet (slow, restarting,
// or held by another gate) can be overtaken by a change that gates the
// node again. Should the node's target then come back to the one released
// (a change reverted and applied again), it is not a node coming back with
// the target it runs: releasing it would upgrade its pods, so it is ordered
// as an upgrade (DESIGN §4, "New target").

// Template is what a StatefulSet's pod template says of the target it
// makes pods for: its target-hash, version and revision labels; and the
// StatefulSet's UID, metadata.generation, which any change of its spec
// (its template among them) moves on, and status.updateRevision, the
// revision its template is.
type Template struct {
	Hash, Version, Revision string
	SetUID, UpdateRevision  string
	Generation              int64
}

// madeForAnother reports whether the template says it was made for a target
// other than node n's, judged as a pod it makes would be (podOnTarget). A
// template that carries neither a hash nor a version says nothing.
func (t Template) madeForAnother(n v2alpha1.Node) bool {
	return (t.Hash != "" || t.Version != "") && !podOnTarget(n, Pod{Hash: t.Hash, Version: t.Version, Revision: t.Revision})
}

// runsAnotherTarget reports whether some pod of node name, or the pod
// template of one of its StatefulSets (read in fresh snapshots only), was
// made for a target other than the node's own.
func (s *Snapshot) runsAnotherTarget(name string) bool {
	n := s.Nodes[name]
	for _, p := range s.Pods[name] {
		if !podOnTarget(n, p) {
			return true
		}
	}
	for _, t := range s.SetTemplates[name] {
		if t.madeForAnother(n) {
			return true
		}
	}
	return false
}

// nothingToRoll reports whether releasing node name leaves its operator
// nothing to roll: no pod and no StatefulSet template of it made for
// another target, and either it runs Ready on its target already, or its
// target is the one released before, its StatefulSet's template says so,
// and that release's rollout is known to have converged (releaseConverged:
// a change reverted before its release, a node brought back up on the
// target it had) — DESIGN §4's Recovery, Ready or not when released. A
// rollout the change overtook before it converged is not done: released
// again, it goes on as a rollout under way.
func (s *Snapshot) nothingToRoll(name string) bool {
	if s.runsAnotherTarget(name) {
		return false
	}
	n := s.Nodes[name]
	return s.isReady(name) || ReleasedTarget(n) == StampedTarget(n) && len(s.SetTemplates[name]) > 0 && (s.releaseConverged(name) || s.takenDown(name))
}

// takenDown reports whether node name, whose StatefulSet's template a
// fresh read found, runs no pod and its StatefulSets want none: its
// operator took it down. Released again on the target it had, every pod
// of it is made anew — DESIGN §4's Recovery, coming back up with the same
// target — whatever its rollout-history says (it may have gone down and
// come back up gated, with no pass of the sequencer in between to keep a
// record of it).
func (s *Snapshot) takenDown(name string) bool {
	return len(s.Pods[name]) == 0 && s.MissingPods[name] == 0
}

// setTemplates returns, by node name, the pod templates of the StatefulSets
// that make the node's pods: not being deleted, their template naming the
// node, with at least one replica — and the node's own StatefulSet, named
// after it (DESIGN §2), whatever its replicas. One scaled to zero runs
// nothing, and a leftover of it (an orphan, an operator's previous one)
// must not hold a node coming back up; but the node's own, scaled to zero
// while the node is down, still says what the operator last made its pods
// for: a release overtaken and then taken down was never carried out, and
// the node comes back as an upgrade, not by its provisioning list.
func setTemplates(sets []appsv1.StatefulSet, nodes map[string]v2alpha1.Node) map[string][]Template {
	var out map[string][]Template
	for _, sts := range sets {
		labels := sts.Spec.Template.Labels
		name := labels[v2alpha1.LabelNode]
		if nodes[name] == nil || sts.DeletionTimestamp != nil || ptr.Deref(sts.Spec.Replicas, 1) == 0 && sts.Name != name {
			continue
		}
		if out == nil {
			out = map[string][]Template{}
		}
		out[name] = append(out[name], Template{
			Hash: labels[v2alpha1.LabelTargetHash], Version: labels[v2alpha1.LabelExpressVersion], Revision: labels[v2alpha1.LabelDeploymentRevision],
			SetUID: string(sts.UID), Generation: sts.Generation, UpdateRevision: sts.Status.UpdateRevision,
		})
	}
	return out
}
