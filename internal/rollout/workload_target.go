package rollout

import (
	appsv1 "k8s.io/api/apps/v1"

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
	return s.SetsOnAnotherTarget[name]
}

// setsOnAnotherTarget returns the nodes one of whose StatefulSets (its pod
// template names the node; not being deleted; scaled to zero or not) has a
// pod template made for another target than the node's: another target
// hash, or, on a template that carries none, another version or revision.
// A template that carries neither says nothing.
func setsOnAnotherTarget(sets []appsv1.StatefulSet, nodes map[string]v2alpha1.Node) map[string]bool {
	var out map[string]bool
	for _, sts := range sets {
		labels := sts.Spec.Template.Labels
		n := nodes[labels[v2alpha1.LabelNode]]
		if n == nil || sts.DeletionTimestamp != nil {
			continue
		}
		another := false
		switch hash, version := labels[v2alpha1.LabelTargetHash], labels[v2alpha1.LabelExpressVersion]; {
		case hash != "":
			another = hash != StampedTarget(n)
		case version != "":
			another = version != n.NodeSpec().ExpressVersion || labels[v2alpha1.LabelDeploymentRevision] != n.NodeSpec().DeploymentRevision
		}
		if another {
			if out == nil {
				out = map[string]bool{}
			}
			out[n.GetName()] = true
		}
	}
	return out
}
