package sequencer

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// DeparturesRegistered watches the validating webhook configuration that
// holds the node webhooks (the release guard's webhooks of backends and
// frontends, which also date a node's departure from its tenant: the
// DeletionDater) and reports, in express_sequencer_departures_undated and
// in the log, when they are not sent every deletion of a node: a stale
// configuration from a version before deletions were dated, an overlay that
// drops DELETE, a webhook that fails open. Deletions are then not dated,
// and a deletion followed by a change within the settle time may be
// released out of order (a node that waited for the deleted one goes ahead
// of the change). Nothing else sees it: the order auditor judges releases
// against the prerequisites' targets, which the deletion left as they were.
type DeparturesRegistered struct {
	// Reader reads the configuration: the manager's client, whose cache
	// holds the one configuration (CacheOptions). What it reports holds
	// nothing and lets nothing go, so the cache is fresh enough.
	Reader client.Reader
	Guard  Guard

	mu   sync.Mutex
	last []string // what the last look found wrong
}

// SetupWithManager looks at the configuration on the leader once it
// starts (the configuration may not exist) and whenever it is created,
// changed or deleted.
func (d *DeparturesRegistered) SetupWithManager(mgr ctrl.Manager) error {
	named := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == d.Guard.Configuration })
	start := make(chan event.GenericEvent, 1)
	start <- event.GenericEvent{Object: &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: d.Guard.Configuration}}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("departures-registered").
		For(&admissionregistrationv1.ValidatingWebhookConfiguration{}, builder.WithPredicates(named)).
		WatchesRawSource(source.Channel(start, &handler.EnqueueRequestForObject{})).
		// One per manager: a test binary may start several.
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		Complete(d)
}

// Reconcile reads the configuration and reports what keeps deletions from
// being dated, once each time that changes.
func (d *DeparturesRegistered) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	found := &cfg
	switch err := d.Reader.Get(ctx, client.ObjectKey{Name: req.Name}, &cfg); {
	case apierrors.IsNotFound(err):
		found = nil
	case err != nil:
		return reconcile.Result{}, fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", req.Name, err)
	}
	problems := d.Guard.whyDeparturesUndated(found)
	d.mu.Lock()
	changed := !slices.Equal(problems, d.last)
	if len(problems) > 0 {
		departuresUndated.Set(1)
	} else {
		departuresUndated.Set(0)
	}
	d.last = problems
	d.mu.Unlock()
	ref := klog.KRef("", d.Guard.Configuration)
	switch {
	case !changed:
	case len(problems) > 0:
		log.FromContext(ctx).Error(nil, "Deletions of nodes are not dated: a node deleted (or moved to another tenant), then another changed within the settle time, may be released out of order; apply the chart's ValidatingWebhookConfiguration",
			"configuration", ref, "problems", problems)
	default:
		log.FromContext(ctx).Info("Deletions of nodes are dated", "configuration", ref)
	}
	return reconcile.Result{}, nil
}

// departuresResources are the resources whose deletions are dated.
var departuresResources = []string{"backends", "frontends"}

// whyDeparturesUndated returns what in cfg (nil: it does not exist) keeps the
// guard's node webhooks from dating every deletion of a node, nil when
// nothing does. Its namespaceSelector is not judged: a namespace it leaves
// out is neither gated nor guarded, and the sequencer reads such tenants
// whole (notJudging).
func (g Guard) whyDeparturesUndated(cfg *admissionregistrationv1.ValidatingWebhookConfiguration) []string {
	if cfg == nil {
		return []string{fmt.Sprintf("ValidatingWebhookConfiguration %s does not exist", g.Configuration)}
	}
	var problems []string
	for _, resource := range departuresResources {
		name := g.Webhooks[resource]
		i := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == name })
		if i < 0 {
			problems = append(problems, fmt.Sprintf("%s has no webhook %s", cfg.Name, name))
			continue
		}
		if why := datesEvery(cfg.Webhooks[i], resource, g.Paths[resource]); why != "" {
			problems = append(problems, fmt.Sprintf("webhook %s %s", name, why))
		}
	}
	return problems
}

// datesEvery returns why webhook w would leave a deletion of resource, or
// its move to another tenant (an update), undated, "" when it is sent every
// one, at path (when path is set).
func datesEvery(w admissionregistrationv1.ValidatingWebhook, resource, path string) string {
	ops := []sentOperation{{admissionregistrationv1.Delete, "deletions"}, {admissionregistrationv1.Update, "updates (a move to another tenant)"}}
	return strings.Join(sentEvery(w, resource, ops, PodSelection{}, path, "deletions"), "; ")
}
