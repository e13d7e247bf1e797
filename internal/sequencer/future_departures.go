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
// departure date of the tenant that lies ahead of its clock by the settle
// time or more (rollout.FutureDepartures), naming the date it replaces
// (AnnotationNodeLeftTenantAtReplaces). It reports whether it wrote any
// (the tenant is then planned again on what it wrote) and, when some
// could not be written, how soon to try again. A write refused (a policy,
// the API server failing), or whose date the webhook put back (a mutating
// replica of an older version, or one that does not take this replica for
// the sequencer), is logged and tried again a redateRetry later, not at
// every pass; the tenant is planned meanwhile, held until that date.
func (r *Reconciler) dateFutureDeparturesAgain(ctx context.Context, snap *rollout.Snapshot) (wrote bool, retryIn time.Duration) {
	for _, name := range rollout.FutureDepartures(snap) {
		// The clock as the patch goes out, not as the tenant was read: a
		// departure dated since is no later (the webhook also takes the
		// date no earlier than its own now).
		now := r.Clock.Now().UTC()
		n := snap.Nodes[name]
		was := n.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt]
		key := client.ObjectKeyFromObject(n).String() + " " + was
		if wait := r.redated.wait(key, now); wait > 0 {
			retryIn = shorter(retryIn, wait)
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
			retryIn = shorter(retryIn, redateRetry)
			log.FromContext(ctx).Error(err, "Dating again a departure dated ahead of this replica's clock failed: the tenant is held until that date and the settle time; trying again in a minute",
				"node", n.GetName(), "date", was)
		case err != nil: // gone: it dates nothing
		case patched.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt] == was ||
			!rollout.NodeLeftTenantAt(patched).Before(now.Add(snap.Grouping.SettleTime)):
			// Put back, or taken at the admitting replica's now, itself
			// ahead (the replica whose clock ran ahead): not dated again.
			r.redated.failed(key, now)
			retryIn = shorter(retryIn, redateRetry)
			log.FromContext(ctx).Error(nil, "A departure dated ahead of this replica's clock was kept by the mutating webhook (a replica of an older version, or one that does not take this replica for the sequencer): the tenant is held until that date and the settle time; trying again in a minute",
				"node", n.GetName(), "date", was)
		default: // dated again (no earlier than the webhook's now), or by a departure since
			r.own.remember(snap.Tenant, patched)
			log.FromContext(ctx).Info("Dated a departure again: its date lay ahead of this replica's clock (a replica whose clock ran ahead dated it)",
				"node", n.GetName(), "was", was, "now", patched.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt])
			wrote = true
		}
	}
	return wrote, retryIn
}

// shorter is the shorter of two waits, 0 being none.
func shorter(a, b time.Duration) time.Duration {
	if a == 0 || b > 0 && b < a {
		return b
	}
	return a
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

// wait returns how long the re-dating key must wait at now before it is
// tried again, 0 when it may be tried.
func (d *redatings) wait(key string, now time.Time) time.Duration {
	d.mu.Lock()
	defer d.mu.Unlock()
	at, ok := d.failAt[key]
	if !ok {
		return 0
	}
	return max(0, redateRetry-now.Sub(at))
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
