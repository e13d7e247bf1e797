package sequencer

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// switchMode carries a tenant across a change of its namespace's mode
// (DESIGN §9). In audit, the gates enforce left on its nodes and pods are
// lifted: nothing holds in audit, and the plan goes on holding them in
// its snapshot only. In enforce, a node audit left ungated with a target
// the sequencer has not released is adopted if the Express operator
// already rolls it, and gated otherwise, to be released in its turn. It
// reports whether it wrote anything; each write is guarded like a release
// (generation, gates and target hash tested).
func (r *Reconciler) switchMode(ctx context.Context, snap *rollout.Snapshot, audit bool) (bool, error) {
	logger := log.FromContext(ctx)
	var errs []error
	wrote := false
	patchNode := func(name string, write gateWrite, what string) {
		n := snap.Nodes[name]
		patch, err := gatePatch(n, write)
		if err == nil {
			patched := v2alpha1.NewNode(n.NodeKind())
			patched.SetName(n.GetName())
			patched.SetNamespace(n.GetNamespace())
			apiWrites.WithLabelValues("patch", resourceOf(n)).Inc()
			if err = r.Client.Patch(ctx, patched, patch, client.FieldOwner(v2alpha1.FieldManager)); err == nil {
				r.own.remember(snap.Tenant, patched)
				modeSwitches.WithLabelValues(what).Inc()
				logger.Info("Carried a node across a change of sequencing mode", "node", n.GetName(), "kind", n.NodeKind(), "action", what)
				wrote = true
				return
			}
		}
		errs = append(errs, fmt.Errorf("%s %s %s for its namespace's sequencing mode: %w", what, n.NodeKind(), n.GetName(), err))
	}
	if !audit {
		adopt, gate := rollout.Unheld(snap)
		if len(adopt)+len(gate) == 0 {
			return false, nil
		}
		if r.Fresh != nil {
			// On the namespace and the tenant as they are now: a cache may
			// not have seen the switch back to audit, nor a pod of the
			// target let go in audit, which makes a node one to adopt; and
			// whether an adopted node converged rests on its StatefulSets
			// (AdoptedConverged), which only fresh reads carry.
			if mode, err := ReadMode(ctx, r.Fresh, snap.Tenant.Namespace, r.DefaultMode); err != nil || mode != v2alpha1.ModeEnforce {
				return true, err
			}
			fresh, err := GatherFresh(ctx, r.Fresh, snap.Tenant, r.Orders, r.Clock.Now(), r.ProgressDeadline, r.Grouping)
			if err != nil || fresh == nil {
				return true, err
			}
			snap = fresh
			adopt, gate = rollout.Unheld(snap)
		}
		for _, name := range adopt {
			// On the fresh read only: a cache knows no template, nor a pod
			// the StatefulSet still has to make.
			converged := r.Fresh != nil && rollout.AdoptedConverged(snap, name)
			record := &releaseRecord{after: rollout.AdoptionRecords(snap, name), now: r.Clock.Now(), converged: converged}
			patchNode(name, gateWrite{virtual: true, record: record}, "adopt")
		}
		for _, name := range gate {
			patchNode(name, gateWrite{gated: true}, "gate")
		}
		return wrote, errors.Join(errs...)
	}
	for name, n := range snap.Nodes {
		if rollout.Gated(n) && !snap.Virtual[name] {
			patchNode(name, gateWrite{}, "lift")
		}
	}
	for _, pods := range snap.Pods {
		for _, p := range pods {
			if !p.HeldBySequencer() || snap.VirtualPods[p.Name] {
				continue // a gate of the plan's view only
			}
			patch, err := podGatePatch(p)
			if err != nil {
				return wrote, err
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: snap.Tenant.Namespace}}
			apiWrites.WithLabelValues("patch", "pods").Inc()
			if err := r.Client.Patch(ctx, pod, patch, client.FieldOwner(v2alpha1.FieldManager)); client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("lifting the scheduling gate of pod %s in audit mode: %w", p.Name, err))
				continue
			}
			r.own.remember(snap.Tenant, pod)
			modeSwitches.WithLabelValues("lift-pod").Inc()
			wrote = true
		}
	}
	return wrote, errors.Join(errs...)
}
