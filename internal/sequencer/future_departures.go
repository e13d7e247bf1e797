package sequencer

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// dateFutureDeparturesAgain dates again, at this replica's now, each
// departure date of the tenant that lies ahead of its clock
// (rollout.FutureDepartures), naming the date it replaces
// (AnnotationNodeLeftTenantAtReplaces), and reports whether it wrote any:
// the tenant is then planned again on what it wrote. A write refused, or
// whose date the webhook put back (a mutating replica that does not take
// this one for the sequencer), is said in the log and tried again no
// sooner than redateRetry later; the tenant is planned as it is meanwhile,
// held until that date and the settle time.
func (r *Reconciler) dateFutureDeparturesAgain(ctx context.Context, snap *rollout.Snapshot) bool {
	wrote := false
	for _, name := range rollout.FutureDepartures(snap) {
		n := snap.Nodes[name]
		was := n.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt]
		key := client.ObjectKeyFromObject(n).String() + " " + was
		now := snap.Now.UTC()
		if !r.redated.due(key, now) {
			continue
		}
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{ // strings always marshal
			v2alpha1.AnnotationNodeLeftTenantAt: now.Format(time.RFC3339Nano), v2alpha1.AnnotationNodeLeftTenantAtReplaces: was}}})
		patched := v2alpha1.NewNode(n.NodeKind())
		patched.SetNamespace(n.GetNamespace())
		patched.SetName(n.GetName())
		apiWrites.WithLabelValues("patch", resourceOf(n)).Inc()
		err := r.Client.Patch(ctx, patched, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(v2alpha1.FieldManager))
		switch {
		case client.IgnoreNotFound(err) != nil:
			r.redated.failed(key, now)
			log.FromContext(ctx).Error(err, "Dating again a departure dated ahead of this replica's clock failed: the tenant is held until that date and the settle time",
				"node", n.GetName(), "date", was)
		case err != nil:
		case rollout.NodeLeftTenantAt(patched).After(now):
			r.redated.failed(key, now)
			log.FromContext(ctx).Error(nil, "A departure dated ahead of this replica's clock was kept by the webhook (it does not take this replica for the sequencer): the tenant is held until that date and the settle time",
				"node", n.GetName(), "date", was)
		default:
			log.FromContext(ctx).Info("Dated a departure again at this replica's now: its date lay ahead of this replica's clock (a replica whose clock ran ahead dated it)",
				"node", n.GetName(), "was", was, "now", now)
			wrote = true
		}
	}
	return wrote
}

// redateRetry is how long after a failed re-dating of a departure the
// same date is tried again.
const redateRetry = time.Minute

// redatings remembers, by node and date, when a re-dating of a departure
// failed, so that each is tried again once a redateRetry has passed, not at
// every pass.
type redatings struct {
	mu     sync.Mutex
	failAt map[string]time.Time
}

// due reports whether the re-dating key may be tried at now.
func (d *redatings) due(key string, now time.Time) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.failAt[key]
	return !ok || now.Sub(at) >= redateRetry
}

// failed records that the re-dating key failed at now, and forgets the
// failures old enough to be tried again.
func (d *redatings) failed(key string, now time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.failAt == nil {
		d.failAt = map[string]time.Time{}
	}
	for k, at := range d.failAt {
		if now.Sub(at) >= redateRetry {
			delete(d.failAt, k)
		}
	}
	d.failAt[key] = now
}
