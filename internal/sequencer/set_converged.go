package sequencer

import (
	"context"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// This file reads the record of convergence the StatefulSet controller
// keeps (DESIGN §2): pods vanish, a StatefulSet's status does not.

// recordsConvergence reports whether StatefulSet sts says, by itself, that
// node n's current target converged on it: its pod template names the node
// and carries the node's target hash, the controller has observed its
// latest spec, and its currentRevision equals its updateRevision — which
// the controller's rolling update (completeRollingUpdate) sets only once
// every one of spec.replicas pods is updated and Ready at once. A
// StatefulSet being deleted, one with no replica (it completes with no pod
// at all), and one whose update strategy never completes a rollout
// (OnDelete) or completes only part of it (a partition) record nothing. Nor
// does a brand-new StatefulSet, whose revisions are equal from the start:
// the caller asks the controller's history (firstRevision) for that.
func recordsConvergence(sts appsv1.StatefulSet, n v2alpha1.Node) bool {
	t := sts.Spec.Template.Labels
	hash := targetHash(n)
	if hash == "" || t[v2alpha1.LabelNode] != n.GetName() || t[v2alpha1.LabelTargetHash] != hash || sts.DeletionTimestamp != nil {
		return false
	}
	if ptr.Deref(sts.Spec.Replicas, 1) < 1 || sts.Status.ObservedGeneration != sts.Generation {
		return false
	}
	strategy := sts.Spec.UpdateStrategy
	if strategy.Type != "" && strategy.Type != appsv1.RollingUpdateStatefulSetStrategyType ||
		strategy.RollingUpdate != nil && ptr.Deref(strategy.RollingUpdate.Partition, 0) > 0 {
		return false
	}
	return sts.Status.UpdateRevision != "" && sts.Status.CurrentRevision == sts.Status.UpdateRevision
}

// setsConverged returns the nodes of s in flight (released, not Ready on
// target, no record of the sequencer's own that they converged) whose
// StatefulSet records that they did converge on their current target after
// a change of its template: the controller revision it converged on is not
// the StatefulSet's first (ControllerRevision.revision above 1), read by
// name. Only such nodes are read, so a tenant at rest costs nothing. A
// sequencer that may not read ControllerRevisions (RBAC get on
// controllerrevisions in group apps) logs it once and takes no record.
func setsConverged(ctx context.Context, r client.Reader, s *Snapshot, sets []appsv1.StatefulSet) (map[string]bool, error) {
	var out map[string]bool
	for _, sts := range sets {
		name := sts.Spec.Template.Labels[v2alpha1.LabelNode]
		n, ok := s.Nodes[name]
		if !ok || out[name] || !s.inFlight(name) || !recordsConvergence(sts, n) {
			continue
		}
		var rev appsv1.ControllerRevision
		err := r.Get(ctx, client.ObjectKey{Namespace: sts.Namespace, Name: sts.Status.UpdateRevision}, &rev)
		switch {
		case apierrors.IsNotFound(err):
			continue // its history is gone: the controller takes the update revision as current from now on
		case apierrors.IsForbidden(err):
			controllerRevisionsForbidden.Do(func() {
				log.FromContext(ctx).Error(err, "Taking no StatefulSet's word that a rollout converged: the sequencer may not read ControllerRevisions (RBAC get on controllerrevisions in group apps)")
			})
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("reading ControllerRevision %s/%s: %w", sts.Namespace, sts.Status.UpdateRevision, err)
		}
		if rev.Revision > 1 {
			if out == nil {
				out = map[string]bool{}
			}
			out[name] = true
		}
	}
	return out, nil
}

// controllerRevisionsForbidden logs once per process that ControllerRevisions
// may not be read.
var controllerRevisionsForbidden sync.Once
