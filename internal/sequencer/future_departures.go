package sequencer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// dateFutureDeparturesAgain dates again, at this replica's now, each
// departure date of the tenant that lies ahead of its clock
// (rollout.FutureDepartures) and reports whether it wrote any: the tenant
// is then planned again on what it wrote. A date the webhook put back (its
// replica's clock too is ahead) is left as it is, and said in the log.
func (r *Reconciler) dateFutureDeparturesAgain(ctx context.Context, snap *rollout.Snapshot) (bool, error) {
	names := rollout.FutureDepartures(snap)
	if len(names) == 0 {
		return false, nil
	}
	now := snap.Now.UTC()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		v2alpha1.AnnotationNodeLeftTenantAt: now.Format(time.RFC3339Nano)}}}) // strings always marshal
	wrote := false
	for _, name := range names {
		n := snap.Nodes[name]
		was := rollout.NodeLeftTenantAt(n)
		patched := v2alpha1.NewNode(n.NodeKind())
		patched.SetNamespace(n.GetNamespace())
		patched.SetName(n.GetName())
		apiWrites.WithLabelValues("patch", resourceOf(n)).Inc()
		if err := r.Client.Patch(ctx, patched, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(v2alpha1.FieldManager)); err != nil {
			return wrote, client.IgnoreNotFound(fmt.Errorf("dating again the departure on %s %s: %w", n.NodeKind(), n.GetName(), err))
		}
		if got := rollout.NodeLeftTenantAt(patched); got.After(now) {
			log.FromContext(ctx).Error(nil, "A departure date ahead of this replica's clock was kept by the webhook: check the clocks of express-sequencer's replicas",
				"node", n.GetName(), "date", got, "now", now)
			continue
		}
		log.FromContext(ctx).Info("Dated a departure again at this replica's now: its date lay ahead of its clock (a replica's clock ran ahead)",
			"node", n.GetName(), "was", was, "now", now)
		wrote = true
	}
	return wrote, nil
}
