package sequencer

import (
	"context"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// ApplyConditionAndRecall applies d's condition to n as a reconcile does
// and returns what the reconciler now holds of n over its cache.
func (r *Reconciler) ApplyConditionAndRecall(ctx context.Context, t rollout.Tenant, n v2alpha1.Node, d rollout.Decision) (client.Object, error) {
	if err := r.applyCondition(ctx, t, n, d); err != nil {
		return nil, err
	}
	k, _ := keyOf(n)
	r.own.mu.Lock()
	defer r.own.mu.Unlock()
	return r.own.objs[k].obj, nil
}

// ErrReadChanged marks a condition write refused because the node changed
// since the plan read it: the tenant is planned again, not failed.
var ErrReadChanged = errReadChanged

// EventsDropped is how many Events the writers dropped, their queue full.
func EventsDropped() float64 { return testutil.ToFloat64(eventsDropped) }

// EventQueue is how many Events a writer holds before it drops them.
const EventQueue = eventQueue

// PartialReads is how many fresh reads went on without what was missing.
func PartialReads(missing string) float64 {
	return testutil.ToFloat64(partialReads.WithLabelValues(missing))
}

// ConditionConflicts is how many condition writes met a conflict, by
// outcome (retried, refused).
func ConditionConflicts(outcome string) float64 {
	return testutil.ToFloat64(conditionConflicts.WithLabelValues(outcome))
}

// DeparturesUndated is the express_sequencer_departures_undated gauge.
func DeparturesUndated() float64 { return testutil.ToFloat64(departuresUndated) }

// Problems returns what the last look at the configuration found keeping
// deletions from being dated, nil when they are.
func (d *DeparturesRegistered) Problems() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.last)
}

// DateFutureDeparturesAgain is dateFutureDeparturesAgain.
func (r *Reconciler) DateFutureDeparturesAgain(ctx context.Context, snap *rollout.Snapshot) (bool, time.Duration) {
	return r.dateFutureDeparturesAgain(ctx, snap)
}

// APIRequests is how many requests caller sent with verb to resource
// (express_sequencer_api_requests_total).
func APIRequests(caller, verb, resource string) float64 {
	return testutil.ToFloat64(apiRequests.WithLabelValues(caller, verb, resource))
}
