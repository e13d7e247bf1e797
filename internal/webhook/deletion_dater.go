package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// DeletionDater dates a node's departure from its tenant — its deletion,
// or a new spec.clusterConfig.clusterName — as it is asked for, on every
// other node of the tenant it leaves that stays (not being deleted): their
// node-left-tenant-at.
//
// A departure changes the order as taking the node down does: the nodes
// after it stop waiting for it. Taking it down is dated by the mutating
// webhook; a deletion is not an update, and once the node is gone nothing
// of it is left to read (a node moved away is read with another tenant).
// Without a date, the nodes it frees go the moment it is gone (a node being
// deleted takes no part in the order), ahead of a change applied just
// after it — kubectl delete fe2, then an edit of fe1 — which the settle
// time would otherwise have grouped with it. The date lives on the nodes
// that stay, so it outlives the node; each of them is written by the
// sequencer's identity, the only one whose date the mutating webhook keeps
// (rollout.Admit), and only a later one. The settle time holds the tenant
// after it, with no cap: it is no node's own change.
//
// The settle hold is the tenant's: one node that stays, dated, holds it
// all. So the departure is let through when at least one is dated (the
// others' failures are warnings), and refused, with each node and reason,
// when none could be, in an enforce namespace: left undated it could
// release a node out of order. In audit nothing is held, and it is let
// through with warnings. A dry run writes nothing (the webhook's
// sideEffects are NoneOnDryRun).
type DeletionDater struct {
	// Reader reads the tenant and its namespace's mode straight from the
	// API server: a cache that lags would leave a node undated.
	Reader client.Reader
	// Writer writes as the sequencer (its identity and field manager).
	Writer client.Writer
	// Clock dates the departure.
	Clock clock.PassiveClock
	// DefaultMode is the mode of a namespace without the sequencing label.
	DefaultMode string
}

// date writes node n's departure (what: "deletion", "move to tenant X")
// from its tenant on the nodes of that tenant that stay, and returns the
// admission warnings.
func (d *DeletionDater) date(ctx context.Context, n v2alpha1.Node, what string) (admission.Warnings, error) {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return nil, apierrors.NewInternalError(fmt.Errorf("reading the admission request: %w", err))
	}
	if req.DryRun != nil && *req.DryRun || n.GetDeletionTimestamp() != nil {
		return nil, nil // a dry run changes nothing; a node already being deleted left the order when its deletion began
	}
	tenant := n.NodeSpec().ClusterConfig.ClusterName
	refuse := func(why string) error {
		return apierrors.NewServiceUnavailable(fmt.Sprintf(
			"the %s of %s is refused: %s; left undated, the nodes of tenant %s after %s could go ahead of a change applied with it: retry it once they can be written",
			what, n.GetName(), why, tenant, n.GetName()))
	}
	read, cancel := context.WithTimeout(ctx, freshReadTimeout)
	defer cancel()
	nodes, err := sequencer.NamespaceNodes(read, d.Reader, n.GetNamespace())
	if err != nil {
		return nil, refuse(fmt.Sprintf("reading the nodes of tenant %s that stay, to date it on them: %v", tenant, err))
	}
	stamp := d.Clock.Now().UTC()
	now := stamp.Format(time.RFC3339Nano)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v2alpha1.AnnotationNodeLeftTenantAt: now}}}) // strings always marshal
	var (
		wg            sync.WaitGroup
		mu            sync.Mutex
		dated         []string
		failed, kept  []string
		staysInTenant = func(s v2alpha1.Node) bool {
			return s.GetUID() != n.GetUID() && s.GetDeletionTimestamp() == nil && s.NodeSpec().ClusterConfig.ClusterName == tenant
		}
	)
	for _, s := range nodes {
		if !staysInTenant(s) {
			continue
		}
		target := v2alpha1.NewNode(s.NodeKind())
		target.SetNamespace(s.GetNamespace())
		target.SetName(s.GetName())
		wg.Go(func() {
			err := d.Writer.Patch(read, target, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(v2alpha1.FieldManager))
			mu.Lock()
			defer mu.Unlock()
			switch {
			case apierrors.IsNotFound(err), err == nil && target.GetDeletionTimestamp() != nil:
				// Deleted meanwhile, or being deleted: it takes no part in
				// the order, and needs no date (its own deletion dates the
				// others).
			case err != nil:
				failed = append(failed, fmt.Sprintf("%s: %v", s.GetName(), err))
			case rollout.NodeLeftTenantAt(target).Before(stamp):
				// The write went through and the date did not stay: the
				// mutating webhook did not take the writer for the
				// sequencer (an identity it was not given) and put it back.
				kept = append(kept, s.GetName())
			default:
				dated = append(dated, s.GetName())
			}
		})
	}
	wg.Wait()
	if len(kept) > 0 {
		slices.Sort(kept)
		failed = append(failed, fmt.Sprintf("%s: the mutating webhook that admitted the write did not keep the date (it does not take this replica's identity for the sequencer's: see --sequencer-user)",
			strings.Join(kept, ", ")))
	}
	if len(failed) == 0 {
		return nil, nil
	}
	slices.Sort(failed)
	where := fmt.Sprintf("(annotation %s, written as express-sequencer, field manager %s) on %s", v2alpha1.AnnotationNodeLeftTenantAt, v2alpha1.FieldManager, strings.Join(failed, "; "))
	if len(dated) > 0 {
		return admission.Warnings{fmt.Sprintf("the %s of %s could not be dated %s: tenant %s is held by the date on %s", what, n.GetName(), where, tenant, strings.Join(slices.Sorted(slices.Values(dated)), ", "))}, nil
	}
	mode, err := sequencer.ReadMode(read, d.Reader, n.GetNamespace(), d.DefaultMode)
	if err == nil && mode == v2alpha1.ModeAudit {
		return admission.Warnings{fmt.Sprintf("the %s of %s could not be dated %s: let through, as namespace %s is in audit mode", what, n.GetName(), where, n.GetNamespace())}, nil
	}
	return nil, refuse(fmt.Sprintf("none of the nodes of tenant %s that stay could be dated %s", tenant, where))
}
