package sequencer

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	acv2alpha1 "github.com/medallia/express-sequencer/internal/applyconfiguration/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// Reconciler sequences the rollouts of every tenant: it gathers a tenant's
// snapshot from the cache, plans, and applies the plan — the gate with
// optimistic concurrency, the PrerequisitesReady condition by server-side
// apply (touching no other condition), and an Event for each change.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// ScopedReads plans a release on the cache with only the StatefulSets
	// of the nodes it rests on read fresh, by name (GatherScoped): for a
	// sequencer whose every release the release guard judges again on a
	// fresh read of the whole tenant. False reads the whole tenant fresh.
	ScopedReads bool
	// Guard names the release guard's webhooks: a scoped read is used only
	// where they are registered to judge every release.
	Guard Guard
	// Fresh reads straight from the API server: a plan that releases a node
	// or a pod is made again from it before it is applied.
	Fresh client.Reader
	// Orders are the installation's default orders.
	Orders defaults.Orders
	// Clock tells the time.
	Clock clock.PassiveClock
	// ProgressDeadline is how long a released node may take to become Ready
	// on its target; 0 turns the check off.
	ProgressDeadline time.Duration
	// Grouping says how a change applied node by node is recognised as one.
	Grouping rollout.Grouping
	// Recorder records Events on nodes.
	Recorder events.EventRecorder
	// DefaultMode is the sequencing mode of a namespace without the
	// express.medallia.com/sequencing label.
	DefaultMode string

	gated, all gatedCounts
	// loopsUnsure counts the tenants whose last plan cut its loop
	// searches short, by why.
	loopsUnsure gatedCounts
	// observed holds, per tenant, when the oldest change not yet reconciled
	// was seen: the start of the release latency.
	observed observations
	// own holds the sequencer's own writes until the cache has them.
	own ownWrites
	// redated are the departure dates ahead of the clock it could not
	// date again (dateFutureDeparturesAgain).
	redated redatings
	// unjudged is when a release planned on a scoped read was last refused
	// by a webhook replica that judges no release, or undone by a mutating
	// webhook, and why: the tenant is read whole for a while after.
	unjudged unjudgedReleases
}

// plan gathers the tenant from the cache, with the sequencer's own writes
// laid over it, and plans. A plan that releases a node or a pod, or records
// a rollout complete, is made again from fresh reads of the API server, and
// that plan is the one applied: the cache's informers lag the API server
// each by its own amount — a user's change, a crash, a release whose answer
// was lost or that another leader made — and a release must never rest on
// any of that; nor on a RolloutComplete record the cache could not prove (it
// knows no StatefulSet still creating a pod; once recorded, a pod of the
// node is recovering, held for its prerequisites, no longer a rollout's).
// Passes that do neither (most of them: waits, explanations) are decided on
// the cache alone.
//
// It returns, with the plan, the field manager its releases are written as:
// FieldManagerGuardedRelease where the plan rests on a scoped read, so that
// a webhook replica that does not judge releases refuses them.
func (r *Reconciler) plan(ctx context.Context, t rollout.Tenant, watch *stopwatch, audit bool) (*rollout.Snapshot, []rollout.Decision, client.FieldOwner, error) {
	view := func(s *rollout.Snapshot) *rollout.Snapshot {
		if audit && s != nil {
			return rollout.AuditView(s)
		}
		return s
	}
	cache := withOwnWrites{Reader: r.Client, own: &r.own}
	raw, err := Gather(ctx, cache, t, r.Orders, r.Clock.Now(), r.ProgressDeadline, r.Grouping)
	switch {
	case err == nil:
		r.own.forgetGone(raw)
	case errors.Is(err, errUncomparable) && r.Fresh != nil:
		raw = nil // the cache cannot be compared with the sequencer's own writes: read fresh
	default:
		return nil, nil, "", err
	}
	cached := view(raw)
	var readFresh func() (*rollout.Snapshot, error)
	if r.Fresh != nil {
		readFresh = func() (*rollout.Snapshot, error) {
			watch.lap("plan")
			fresh, err := GatherFresh(ctx, r.Fresh, t, r.Orders, r.Clock.Now(), r.ProgressDeadline, r.Grouping)
			return view(fresh), err
		}
	}
	if !r.ScopedReads || readFresh == nil {
		snap, decisions, fresh, err := rollout.PlanOnFreshest(cached, readFresh)
		if err != nil {
			return nil, nil, "", err
		}
		if fresh {
			releaseReads.WithLabelValues(rollout.ReadTenant, "none").Inc()
			watch.lap("fresh_read")
		} else {
			watch.lap("plan")
		}
		return snap, decisions, client.FieldOwner(v2alpha1.FieldManager), nil
	}
	readScoped := func(scope []string) (*rollout.Snapshot, rollout.Fallback, error) {
		watch.lap("plan")
		// In audit the guard lets every release through: what the plan
		// records there (carried into enforce by a switch) rests on the
		// tenant read whole. audit was read fresh (Reconcile).
		if audit {
			return nil, rollout.Fallback{Label: rollout.FallbackGuard, Why: WhyNotGuarded + "the namespace is in audit mode"}, nil
		}
		if why := r.unjudged.why(r.Clock.Now()); why != "" {
			return nil, rollout.Fallback{Label: rollout.FallbackGuard, Why: WhyNotGuarded + why}, nil
		}
		// Where the cache already shows the naming rule broken, nothing is
		// read by name, the guard's registration included.
		known, why, err := CachedOrdinals(ctx, cache, t.Namespace, scope)
		if err != nil || !why.None() {
			return nil, why, err
		}
		// Whether the guard judges the namespace's releases, and its mode,
		// read fresh — a cache that has not seen the guard deregistered, the
		// namespace relabelled out of its selector or switched to audit is
		// not enough — at the same time as the workload.
		// Where the guard does not judge, the scoped read is cut short and
		// whatever it met is left unsaid: the tenant is read whole.
		var guarded string
		var guardErr, scopedErr error
		var scoped *rollout.Snapshot
		scopedCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		var wg sync.WaitGroup
		wg.Go(func() {
			guarded, guardErr = r.Guard.notJudging(ctx, r.Fresh, t.Namespace, r.DefaultMode)
			if guarded != "" {
				cancel()
			}
		})
		wg.Go(func() { scoped, why, scopedErr = gatherScoped(scopedCtx, known, r.Fresh, raw, scope) })
		wg.Wait()
		switch {
		case guardErr != nil:
			return nil, rollout.Fallback{}, guardErr
		case guarded != "":
			return nil, rollout.Fallback{Label: rollout.FallbackGuard, Why: guarded}, nil
		case scopedErr != nil:
			return nil, rollout.Fallback{}, scopedErr
		}
		if why.None() {
			watch.lap("scoped_read")
		}
		return view(scoped), why, nil
	}
	snap, decisions, read, why, err := rollout.PlanOnScoped(cached, readScoped, readFresh)
	if err != nil {
		return nil, nil, "", err
	}
	switch read {
	case rollout.ReadDecision:
		releaseReads.WithLabelValues(read, "none").Inc()
		return snap, decisions, client.FieldOwner(v2alpha1.FieldManagerGuardedRelease), nil
	case rollout.ReadTenant:
		releaseReads.WithLabelValues(read, why.Label).Inc()
		log.FromContext(ctx).V(1).Info("Read the whole tenant to plan a release", "why", why.Why)
		watch.lap("fresh_read")
	default:
		watch.lap("plan")
	}
	return snap, decisions, client.FieldOwner(v2alpha1.FieldManager), nil
}

// CacheOptions restricts the manager's pod cache to pods of Express nodes and
// keeps only what the sequencer reads of them, so memory grows with the
// Express pods alone; of the validating webhook configurations it watches
// only the one named validating; of every other object it drops the
// managed fields, and of Express nodes the manifest last applied to them
// but for the lists it sets (StripNode).
func CacheOptions(validating string) cache.Options {
	sel, _ := labels.Parse(v2alpha1.LabelNode) // a constant "exists" selector always parses
	return cache.Options{
		// Nothing the sequencer decides reads managedFields: about half of
		// a node object's size.
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:        {Label: sel, Transform: stripPod},
			&v2alpha1.Backend{}:  {Transform: StripNode},
			&v2alpha1.Frontend{}: {Transform: StripNode},
			// Of the cluster's validating webhook configurations, only the
			// one holding the node webhooks is watched (DeparturesRegistered).
			&admissionregistrationv1.ValidatingWebhookConfiguration{}: {Field: fields.OneTermEqualSelector("metadata.name", validating)},
		},
	}
}

// StripNode drops a node's managed fields, and cuts the manifest kubectl
// apply or Argo CD's client-side apply keeps on it (every field of the
// Express operator's as well as ours, read only for which prerequisite
// lists it sets) to those lists' names, and its rollout-history to what
// the plan reads of it (rollout.CutForCache); the strings other nodes
// repeat it shares with them (internNode). Nothing writes a cached node
// back.
func StripNode(obj any) (any, error) {
	n, ok := obj.(v2alpha1.Node)
	if !ok {
		return obj, nil
	}
	n.SetManagedFields(nil)
	rollout.CutForCache(n.GetAnnotations())
	internNode(n)
	return n, nil
}

// SetupWithManager registers the field indexes and the tenant controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, maxConcurrent int) error {
	if r.Fresh == nil {
		// Without one, every release would rest on the cache (DESIGN §4b).
		return errors.New("the sequencer needs a reader of the API server that bypasses the cache (Fresh)")
	}
	r.gated.gauge, r.all.gauge, r.loopsUnsure.gauge = gatedNodes, nodesByReason, loopsUnsureTenants
	ctx := context.Background()
	byTenant := func(o client.Object) []string {
		return []string{o.(v2alpha1.Node).NodeSpec().ClusterConfig.ClusterName}
	}
	if err := errors.Join(
		mgr.GetFieldIndexer().IndexField(ctx, &v2alpha1.Backend{}, IndexTenant, byTenant),
		mgr.GetFieldIndexer().IndexField(ctx, &v2alpha1.Frontend{}, IndexTenant, byTenant),
		mgr.GetFieldIndexer().IndexField(ctx, &corev1.Pod{}, IndexPodNode, func(o client.Object) []string {
			return []string{o.GetLabels()[v2alpha1.LabelNode]}
		}),
	); err != nil {
		return fmt.Errorf("indexing the cache: %w", err)
	}
	nodeTenant := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []rollout.Tenant {
		t := rollout.Tenant{Namespace: o.GetNamespace(), ClusterName: o.(v2alpha1.Node).NodeSpec().ClusterConfig.ClusterName}
		r.observe(t)
		return []rollout.Tenant{t}
	})
	// Spec and annotation changes matter; status changes (the sequencer's
	// own condition, the Express operator's) do not.
	nodeChanges := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
	return builder.TypedControllerManagedBy[rollout.Tenant](mgr).
		Named("sequencer").
		Watches(&v2alpha1.Backend{}, nodeTenant, nodeChanges).
		Watches(&v2alpha1.Frontend{}, nodeTenant, nodeChanges).
		Watches(&corev1.Pod{}, handler.TypedEnqueueRequestsFromMapFunc(r.podTenant),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[v2alpha1.LabelNode] != "" }))).
		// A namespace switched between audit and enforce: its tenants are
		// carried across (switchMode).
		Watches(&corev1.Namespace{}, handler.TypedEnqueueRequestsFromMapFunc(r.namespaceTenants),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WithOptions(controller.TypedOptions[rollout.Tenant]{MaxConcurrentReconciles: maxConcurrent, SkipNameValidation: ptr.To(true)}).
		Complete(r)
}

// podTenant maps a pod to the tenant of the node its label names.
func (r *Reconciler) podTenant(ctx context.Context, pod client.Object) []rollout.Tenant {
	key := client.ObjectKey{Namespace: pod.GetNamespace(), Name: pod.GetLabels()[v2alpha1.LabelNode]}
	for _, n := range []v2alpha1.Node{&v2alpha1.Frontend{}, &v2alpha1.Backend{}} {
		if err := r.Client.Get(ctx, key, n); err == nil {
			t := rollout.Tenant{Namespace: key.Namespace, ClusterName: n.NodeSpec().ClusterConfig.ClusterName}
			r.observe(t)
			return []rollout.Tenant{t}
		}
	}
	return nil // a pod of no known node: its node's own event enqueues the tenant
}

// namespaceTenants maps a namespace to the tenants of its nodes.
func (r *Reconciler) namespaceTenants(ctx context.Context, ns client.Object) []rollout.Tenant {
	seen := map[rollout.Tenant]bool{}
	var out []rollout.Tenant
	for _, list := range []client.ObjectList{&v2alpha1.BackendList{}, &v2alpha1.FrontendList{}} {
		if err := r.Client.List(ctx, list, client.InNamespace(ns.GetName())); err != nil {
			log.FromContext(ctx).Error(err, "Listing the nodes of a namespace whose sequencing mode changed", "namespace", ns.GetName())
			continue
		}
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			t := rollout.Tenant{Namespace: ns.GetName(), ClusterName: o.(v2alpha1.Node).NodeSpec().ClusterConfig.ClusterName}
			if !seen[t] {
				seen[t] = true
				r.observe(t)
				out = append(out, t)
			}
			return nil
		})
	}
	return out
}

func (r *Reconciler) observe(t rollout.Tenant) { r.observed.see(t, r.Clock.Now()) }

// Reconcile sequences one tenant: gather and plan, then apply.
func (r *Reconciler) Reconcile(ctx context.Context, t rollout.Tenant) (reconcile.Result, error) {
	ctx = WithCaller(ctx, CallerSequencer)
	mode, err := ReadMode(ctx, r.Client, t.Namespace, r.DefaultMode)
	if err == nil && mode == v2alpha1.ModeAudit && r.Fresh != nil {
		// Audit lifts gates and records releases no gate held: only on the
		// namespace as it is now, never on a cache that has not seen it
		// switched to enforce.
		mode, err = ReadMode(ctx, r.Fresh, t.Namespace, r.DefaultMode)
	}
	if err != nil {
		reconcileErrors.WithLabelValues("gather").Inc()
		return reconcile.Result{}, err
	}
	audit := mode == v2alpha1.ModeAudit
	since := r.observed.take(t)
	watch := newStopwatch(r.Clock, since)
	snap, decisions, owner, err := r.plan(ctx, t, watch, audit)
	if err != nil {
		reconcileErrors.WithLabelValues("gather").Inc()
		return reconcile.Result{}, err
	}
	wrote, redateIn := r.dateFutureDeparturesAgain(ctx, snap)
	if wrote {
		r.observed.restore(t, since)
		return reconcile.Result{RequeueAfter: replanAfter}, nil // planned again on the dates written
	}
	if changed, err := r.switchMode(ctx, snap, audit); changed || err != nil {
		// Planned again on what the switch wrote.
		return reconcile.Result{RequeueAfter: replanAfter}, err
	}
	if audit {
		decisions = rollout.AuditDecisions(snap, decisions)
	}
	r.count(ctx, t, decisions, audit)
	releases := rollout.ReleasesAny(snap, decisions)
	if err := r.applyPlan(ctx, snap, decisions, since, watch, owner); err != nil {
		r.observed.restore(t, since) // the retry's releases are timed from the same change
		if errors.Is(err, errReadChanged) {
			// Counted in express_sequencer_condition_conflicts_total, not
			// logged and counted as an error: optimistic concurrency at work.
			log.FromContext(ctx).V(1).Info("Planning again: a node changed since it was read", "error", err.Error())
			return reconcile.Result{RequeueAfter: replanAfter}, nil
		}
		return reconcile.Result{}, err
	}
	if releases {
		watch.observe()
	}
	return reconcile.Result{RequeueAfter: shorter(recheckAfter(decisions), redateIn)}, nil
}

// applyPlan applies a tenant's decisions. Convergence records go first:
// once a node's pods are gone (a crash right after a release), its
// RolloutComplete condition is what says its rollout was done, so it must
// never lag a release — of a node or of pods — that relied on it, even if
// the sequencer stops between two writes. (A release also names what it
// relied on in its own patch, released-after; that record lives only as long
// as the released node, so it cannot replace this one.) Then releases, one by
// one: a node waiting in line should not also wait for the condition updates
// of the nodes behind it. The other changes touch one node each and go out
// in parallel.
func (r *Reconciler) applyPlan(ctx context.Context, snap *rollout.Snapshot, decisions []rollout.Decision, since time.Time, watch *stopwatch, owner client.FieldOwner) error {
	var records, releases, rest []rollout.Decision
	for _, d := range decisions {
		switch {
		case !d.Changed(snap.Nodes[d.Node]):
		case d.Condition.Reason == v2alpha1.ReasonRolloutComplete:
			records = append(records, d)
		case rollout.Releasing(snap, d):
			releases = append(releases, d)
		default:
			rest = append(rest, d)
		}
	}
	if err := r.applyAll(ctx, snap, records, since, owner); err != nil {
		return err
	}
	watch.lap("records")
	var errs []error
	for _, d := range releases {
		errs = append(errs, r.apply(ctx, snap, d, since, owner))
	}
	watch.lap("release")
	errs = append(errs, r.applyAll(ctx, snap, rest, since, owner))
	watch.lap("rest")
	return errors.Join(errs...)
}

// count sets the tenant's share of the gauges: gated nodes and all nodes,
// by reason, and, in enforce, whether its plan cut its loop searches short
// — logged as that starts and stops, since the gauge names no tenant.
func (r *Reconciler) count(ctx context.Context, t rollout.Tenant, decisions []rollout.Decision, audit bool) {
	gated, all := map[string]int{}, map[string]int{}
	for _, d := range decisions {
		if d.Gated {
			gated[d.Condition.Reason]++
		}
		all[d.Condition.Reason]++
	}
	r.gated.set(t, gated)
	r.all.set(t, all)
	unsure, why := map[string]int{}, ""
	if !audit && len(decisions) > 0 {
		why = decisions[0].LoopsUnsure
	}
	if why != "" {
		unsure[why] = 1
	}
	was := ""
	for w := range r.loopsUnsure.set(t, unsure) {
		was = w // one at most
	}
	if was == why {
		return
	}
	logger := log.FromContext(ctx).WithValues("namespace", t.Namespace, "cluster", t.ClusterName)
	if why != "" {
		logger.Info("The tenant's prerequisite lists make more wait-for loops than one plan searches: each wait not searched is kept; nothing goes out of order, but the tenant may stall (express_sequencer_tenants_loops_unsure)", "why", why)
	} else {
		logger.Info("The tenant's wait-for loops are searched to the end again")
	}
}

// recheckAfter is the soonest another look is asked for, 0 for none.
func recheckAfter(decisions []rollout.Decision) time.Duration {
	var after time.Duration
	for _, d := range decisions {
		if d.RecheckAfter > 0 && (after == 0 || d.RecheckAfter < after) {
			after = d.RecheckAfter
		}
	}
	return after
}

// observations remember, per tenant, when the oldest change not yet
// reconciled was seen: the start of the release latency.
type observations struct {
	mu sync.Mutex
	at map[rollout.Tenant]time.Time
}

// see records that a change of tenant t was seen now, unless an older one
// is still waiting.
func (o *observations) see(t rollout.Tenant, now time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.at == nil {
		o.at = map[rollout.Tenant]time.Time{}
	}
	if _, ok := o.at[t]; !ok {
		o.at[t] = now
	}
}

// restore puts back at, taken by a reconcile that failed, unless a change
// seen before it is already there.
func (o *observations) restore(t rollout.Tenant, at time.Time) {
	if at.IsZero() {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.at == nil {
		o.at = map[rollout.Tenant]time.Time{}
	}
	if cur, ok := o.at[t]; !ok || at.Before(cur) {
		o.at[t] = at
	}
}

// take returns when the oldest change of t not yet reconciled was seen
// (zero if none) and forgets it.
func (o *observations) take(t rollout.Tenant) time.Time {
	o.mu.Lock()
	defer o.mu.Unlock()
	at := o.at[t]
	delete(o.at, t)
	return at
}

// resourceOf is the API resource of a node, for metrics.
func resourceOf(n v2alpha1.Node) string {
	if n.NodeKind() == v2alpha1.KindBackend {
		return "backends"
	}
	return "frontends"
}

// applyAll applies decisions that touch one node each, in parallel.
func (r *Reconciler) applyAll(ctx context.Context, snap *rollout.Snapshot, decisions []rollout.Decision, since time.Time, owner client.FieldOwner) error {
	var g errgroup.Group
	errs := make([]error, len(decisions))
	for i, d := range decisions {
		g.Go(func() error {
			errs[i] = r.apply(ctx, snap, d, since, owner)
			return nil
		})
	}
	_ = g.Wait()
	return errors.Join(errs...)
}

// apply makes one node match its decision. The gate goes first, as a JSON
// patch that tests the generation and the gates it decided on: if the spec
// changed since the snapshot the patch fails, and the tenant is planned
// again from fresh data; status and annotation changes do not get in the way.
// A release's Event goes right after its gate patch; then the held pods'
// scheduling gates, the condition (tested against the node's
// resourceVersion: applyCondition), and any other Event. The gates are
// written as owner (Reconciler.plan).
func (r *Reconciler) apply(ctx context.Context, snap *rollout.Snapshot, d rollout.Decision, since time.Time, owner client.FieldOwner) error {
	n := snap.Nodes[d.Node]
	if !d.Changed(n) {
		return nil
	}
	logger := log.FromContext(ctx).WithValues("node", n.GetName(), "kind", n.NodeKind())
	before := rollout.Gated(n)
	if before != d.Gated {
		virtual := snap.Virtual[d.Node]
		write := gateWrite{gated: d.Gated, virtual: virtual}
		if d.RecordRelease {
			write.record = &releaseRecord{after: d.ReleasedAfter, set: d.ReleasedSetRevision, now: r.Clock.Now(), converged: d.ReleasedConverged}
		}
		patch, err := gatePatch(n, write)
		if err != nil {
			return err
		}
		apiWrites.WithLabelValues("patch", resourceOf(n)).Inc()
		// The answer is decoded into an empty node: decoded into n, a
		// decoder that merges maps would keep the annotations the patch
		// removes.
		patched := v2alpha1.NewNode(n.NodeKind())
		patched.SetName(n.GetName())
		patched.SetNamespace(n.GetNamespace())
		if err := r.Client.Patch(ctx, patched, patch, owner); err != nil {
			r.unjudged.see(err, r.Clock.Now())
			reconcileErrors.WithLabelValues("gate").Inc()
			return fmt.Errorf("updating the gate of %s %s: %w", n.NodeKind(), n.GetName(), err)
		}
		n = patched
		r.own.remember(snap.Tenant, n)
		if !virtual && rollout.Gated(n) != d.Gated {
			// A mutating webhook undid the write (one of an earlier version
			// that does not know the field manager it was written as; the
			// namespace switched to audit as a gate went on): not a
			// release, nor a gate; the next pass plans again on what is.
			stored := "off"
			if rollout.Gated(n) {
				stored = "still on"
			}
			if owner == client.FieldOwner(v2alpha1.FieldManagerGuardedRelease) {
				r.unjudged.undone(r.Clock.Now())
			}
			reconcileErrors.WithLabelValues("gate").Inc()
			return fmt.Errorf("updating the gate of %s %s: the write was stored with the gate %s (a mutating webhook undid it: one of an earlier version, or the namespace switched to audit); planning again",
				n.NodeKind(), n.GetName(), stored)
		}
		if !d.Gated && !virtual {
			releases.WithLabelValues(d.Condition.Reason).Inc()
			if !since.IsZero() {
				releaseLatency.Observe(r.Clock.Since(since).Seconds())
			}
		}
		logger.Info("Changed gate", "gated", d.Gated, "reason", d.Condition.Reason, "message", d.Condition.Message)
		if !d.KeepCondition {
			// The release's Event goes as soon as the release is written:
			// a pod patch or a condition write failing after it must not
			// lose it — the next pass only catches the condition up.
			r.event(n, d, before)
		}
	}
	if d.RecordConverged {
		recorded, err := r.recordConverged(ctx, n)
		if err != nil {
			reconcileErrors.WithLabelValues("record").Inc()
			return err
		}
		n = recorded
		r.own.remember(snap.Tenant, n)
	}
	if err := r.releasePods(ctx, snap, d, owner); err != nil {
		reconcileErrors.WithLabelValues("pod").Inc()
		return err
	}
	if err := r.markPodsWouldRelease(ctx, snap, d); err != nil {
		reconcileErrors.WithLabelValues("pod").Inc()
		return err
	}
	d.Condition.ObservedGeneration = n.GetGeneration()
	if d.KeepCondition {
		return nil
	}
	if err := r.applyCondition(ctx, snap.Tenant, n, d); err != nil {
		if !errors.Is(err, errReadChanged) {
			reconcileErrors.WithLabelValues("status").Inc()
		}
		return err
	}
	if before == d.Gated {
		// Any other Event goes with its condition: refused, the next pass
		// decides both again (a pod release's too: its pods are let go,
		// and the next pass's Event says the recovery).
		r.event(n, d, before)
	}
	return nil
}

// event records d's Event, if any, on n; before is whether n was gated.
func (r *Reconciler) event(n v2alpha1.Node, d rollout.Decision, before bool) {
	if d.Event == nil {
		return
	}
	action := "Wait"
	switch {
	case before && !d.Gated:
		action = "Release"
	case len(d.PodsToRelease) > 0:
		action = "ReleasePods"
	}
	r.Recorder.Eventf(n, nil, d.Event.Type, d.Event.Reason, action, "%s", d.Event.Message)
}

// releasePods removes the sequencer's scheduling gate from the decision's
// pods, each with a JSON patch that tests the gates it saw: only its own
// gate goes, whatever else holds the pod.
func (r *Reconciler) releasePods(ctx context.Context, snap *rollout.Snapshot, d rollout.Decision, owner client.FieldOwner) error {
	return r.patchPods(ctx, snap, d.Node, d.PodsToRelease, owner, "removing the scheduling gate of pod %s", podGatePatch, client.IgnoreNotFound, func(name string) {
		podReleases.Inc()
		log.FromContext(ctx).Info("Released pod", "node", d.Node, "pod", name)
	})
}

// markPodsWouldRelease records, in audit mode, on each pod the pod webhook
// would have held, that the plan would let it go now
// (AnnotationWouldReleaseAt): the end of the hold the order auditor
// reports. A pod already marked keeps its first mark.
func (r *Reconciler) markPodsWouldRelease(ctx context.Context, snap *rollout.Snapshot, d rollout.Decision) error {
	at := r.Clock.Now().UTC().Format(time.RFC3339Nano)
	mark := func(p rollout.Pod) (client.Patch, error) {
		// Tested against the pod planned on: a pod made again under its
		// name since is not marked for it.
		patch, err := json.Marshal([]map[string]any{
			{"op": "test", "path": "/metadata/uid", "value": p.UID},
			{"op": "add", "path": AnnotationPath(v2alpha1.AnnotationWouldReleaseAt), "value": at},
		})
		return client.RawPatch(types.JSONPatchType, patch), err
	}
	gone := func(err error) error { // gone, or made again since
		if apierrors.IsInvalid(err) {
			return nil
		}
		return client.IgnoreNotFound(err)
	}
	return r.patchPods(ctx, snap, d.Node, d.PodsWouldRelease, client.FieldOwner(v2alpha1.FieldManager), "recording that enforcing would let pod %s go", mark, gone, func(string) {})
}

// patchPods patches each pod of node named in names that snap holds with
// the patch patchOf makes of it. A write that fails with an error passed
// over counts as done (the pod gone, say); one that fails otherwise is
// returned, saying what. Each pod patched is
// remembered as the sequencer's own write and passed to done. what is the
// write, a format of the pod's name; owner its field manager.
func (r *Reconciler) patchPods(ctx context.Context, snap *rollout.Snapshot, node string, names []string, owner client.FieldOwner, what string,
	patchOf func(rollout.Pod) (client.Patch, error), passOver func(error) error, done func(name string)) error {
	var errs []error
	for _, name := range names {
		i := slices.IndexFunc(snap.Pods[node], func(p rollout.Pod) bool { return p.Name == name })
		if i < 0 {
			continue
		}
		patch, err := patchOf(snap.Pods[node][i])
		if err != nil {
			return err
		}
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: snap.Tenant.Namespace}}
		apiWrites.WithLabelValues("patch", "pods").Inc()
		if err := r.Client.Patch(ctx, pod, patch, owner); passOver(err) != nil {
			r.unjudged.see(err, r.Clock.Now())
			errs = append(errs, fmt.Errorf("%s: %w", fmt.Sprintf(what, name), err))
			continue
		}
		r.own.remember(snap.Tenant, pod)
		done(name)
	}
	return errors.Join(errs...)
}

// podGatePatch returns the JSON patch that removes the sequencer's scheduling
// gate from a pod, guarded by a test of the gates it had.
func podGatePatch(p rollout.Pod) (client.Patch, error) {
	gates := make([]corev1.PodSchedulingGate, 0, len(p.Gates))
	var rest []corev1.PodSchedulingGate
	for _, g := range p.Gates {
		gates = append(gates, corev1.PodSchedulingGate{Name: g})
		if g != v2alpha1.GateSequencer {
			rest = append(rest, corev1.PodSchedulingGate{Name: g})
		}
	}
	ops := []map[string]any{{"op": "test", "path": "/spec/schedulingGates", "value": gates}}
	if p.UID != "" {
		// The pod planned for, not one made since under its name, nor an
		// earlier node's left over, which the guard does not judge.
		ops = append(ops, map[string]any{"op": "test", "path": "/metadata/uid", "value": p.UID})
	}
	if len(rest) == 0 {
		ops = append(ops, map[string]any{"op": "remove", "path": "/spec/schedulingGates"})
	} else {
		ops = append(ops, map[string]any{"op": "replace", "path": "/spec/schedulingGates", "value": rest})
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encoding the scheduling gate patch of %s: %w", p.Name, err)
	}
	return client.RawPatch(types.JSONPatchType, data), nil
}

// gateWrite is what a gate patch writes: the sequencer's gate added or
// removed, and, with the removal, the release's record.
type gateWrite struct {
	// gated: the node carries the gate after the patch.
	gated bool
	// virtual: the gate exists in the plan's snapshot only (audit mode):
	// no gate is touched, and the generation stays.
	virtual bool
	// record, when set, is the release recorded in the same patch.
	record *releaseRecord
}

// releaseRecord is what a release records with the gate's removal.
type releaseRecord struct {
	// after are the converged rollouts it relied on (released-after).
	after map[string]string
	// set is the node's StatefulSet at that moment (released-set-revision).
	set string
	// now is the time of the release (released-at).
	now time.Time
	// converged: the release leaves the operator nothing to roll, and the
	// node's own rollout is recorded converged with the others.
	converged bool
}

// gatePatch returns the JSON patch that adds or removes the sequencer's gate,
// guarded by tests of the generation, the UID and the current gates. A
// release (w.record) also writes, in the same patch, the target it
// released, the generation the patch produces and its record, guarded by a
// test of the target hash: the release can never be lost between two
// writes, nor recorded for a target that changed meanwhile, and what it
// relied on is recorded with it.
func gatePatch(n v2alpha1.Node, w gateWrite) (client.Patch, error) {
	gated, virtual := w.gated, w.virtual
	// The spec is as read (its generation is tested), so the sequencer's
	// gate is where it was read: only that item is added or removed, and
	// every other gate stays as stored, fields the Go types do not model
	// included.
	gates := n.NodeSpec().RolloutGates
	ops := []map[string]any{{"op": "test", "path": "/metadata/generation", "value": n.GetGeneration()}}
	if uid := n.GetUID(); uid != "" {
		// The node planned for, not one of the same name created since at
		// the same generation.
		ops = append(ops, map[string]any{"op": "test", "path": "/metadata/uid", "value": uid})
	}
	ours := map[string]any{"name": v2alpha1.GateSequencer}
	i := slices.IndexFunc(gates, func(g v2alpha1.RolloutGate) bool { return g.Name == v2alpha1.GateSequencer })
	// A virtual gate (audit mode) exists in the plan's snapshot only: its
	// release records the target and touches no gate, and so leaves the
	// generation as it is.
	generation := n.GetGeneration() + 1
	if virtual {
		generation = n.GetGeneration()
	}
	switch {
	case virtual, gated && i >= 0, !gated && i < 0:
		// Nothing to change; the generation test keeps the patch honest.
	case gated && len(gates) == 0:
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/rolloutGates", "value": []any{ours}})
	case gated:
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/rolloutGates/-", "value": ours})
	case len(gates) == 1: // ours alone: no empty list is stored
		ops = append(ops, map[string]any{"op": "test", "path": "/spec/rolloutGates/0/name", "value": v2alpha1.GateSequencer},
			map[string]any{"op": "remove", "path": "/spec/rolloutGates"})
	default:
		at := "/spec/rolloutGates/" + strconv.Itoa(i)
		ops = append(ops, map[string]any{"op": "test", "path": at + "/name", "value": v2alpha1.GateSequencer},
			map[string]any{"op": "remove", "path": at})
	}
	if rec := w.record; rec != nil {
		hash := rollout.StampedTarget(n)
		released := map[string]string{
			v2alpha1.AnnotationReleasedTarget:     hash,
			v2alpha1.AnnotationReleasedGeneration: strconv.FormatInt(generation, 10),
			v2alpha1.AnnotationReleasedAt:         rec.now.UTC().Format(time.RFC3339Nano),
		}
		after := rec.after
		if rec.converged {
			// Nothing to roll: its own rollout, the one this release
			// makes, converged already.
			after = maps.Clone(after)
			if after == nil {
				after = map[string]string{}
			}
			after[n.GetName()] = string(n.GetUID()) + "/" + released[v2alpha1.AnnotationReleasedGeneration]
		}
		if len(after) > 0 {
			data, err := json.Marshal(after)
			if err != nil {
				return nil, fmt.Errorf("encoding the %s record of %s: %w", v2alpha1.AnnotationReleasedAfter, n.GetName(), err)
			}
			released[v2alpha1.AnnotationReleasedAfter] = string(data)
		}
		if rec.set != "" {
			released[v2alpha1.AnnotationReleasedSetRevision] = rec.set
		}
		if len(n.GetAnnotations()) == 0 {
			// The map is written whole: only onto the node as read, so
			// that an annotation added since (no generation moves for one)
			// is not lost. A node the webhook stamped has annotations.
			ops = append(ops, map[string]any{"op": "test", "path": "/metadata/resourceVersion", "value": n.GetResourceVersion()},
				map[string]any{"op": "add", "path": "/metadata/annotations", "value": released})
		} else {
			if hash != "" {
				ops = append(ops, map[string]any{"op": "test", "path": AnnotationPath(v2alpha1.AnnotationTargetHash), "value": hash})
			}
			for _, key := range rollout.SequencerOnly {
				_, had := n.GetAnnotations()[key]
				switch value, ok := released[key]; {
				case ok:
					ops = append(ops, map[string]any{"op": "add", "path": AnnotationPath(key), "value": value})
				case had: // an earlier release's record: this one relied on no converged rollout
					ops = append(ops, map[string]any{"op": "remove", "path": AnnotationPath(key)})
				}
			}
		}
	}
	data, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encoding the gate patch of %s: %w", n.GetName(), err)
	}
	return client.RawPatch(types.JSONPatchType, data), nil
}

// AnnotationPath is the JSON pointer of an annotation.
func AnnotationPath(key string) string {
	return "/metadata/annotations/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// applyCondition server-side applies the PrerequisitesReady condition as
// the sequencer's field manager: the conditions list is a map by type, so
// the Express operator's conditions are left alone. It carries the
// resourceVersion of the node as the plan read it (or as the gate patch
// answered): the condition is the record that a rollout converged (for a
// first rollout, or a rollout of the same template, the only one), and a
// replica that planned on an older state and writes late — frozen after
// its read, its lease long gone — would otherwise replace it: with a reason
// from before it (the release, a progress deadline, a wait), or with a
// RolloutComplete of an older release or of an object since recreated
// under the same name. Either way the node would read as a rollout under
// way, whose held pods may go ahead of a predecessor not Ready. Refused
// (409 Conflict), the tenant is planned again.
func (r *Reconciler) applyCondition(ctx context.Context, t rollout.Tenant, n v2alpha1.Node, d rollout.Decision) error {
	conds := append(n.NodeStatus().Conditions[:0:0], n.NodeStatus().Conditions...)
	if !rollout.SetCondition(&conds, d.Condition, r.Clock.Now()) {
		return nil
	}
	c := meta.FindStatusCondition(conds, v2alpha1.ConditionPrerequisitesReady)
	err := r.applyConditionAt(ctx, t, n, c, n.GetResourceVersion())
	if !apierrors.IsConflict(err) {
		return err
	}
	// Refused. If only what the plan does not read changed (the Express
	// operator's status, its own conditions), the decision stands on the
	// node as it is now: written once more at its version.
	now, unchanged, readErr := r.unchangedForCondition(ctx, n)
	if readErr != nil {
		return fmt.Errorf("%w; reading %s %s again: %w", err, n.NodeKind(), n.GetName(), readErr)
	}
	if !unchanged {
		conditionConflicts.WithLabelValues("refused").Inc()
		return fmt.Errorf("%w: %w", errReadChanged, err)
	}
	conditionConflicts.WithLabelValues("retried").Inc()
	if err := r.applyConditionAt(ctx, t, n, c, now.GetResourceVersion()); err != nil {
		if apierrors.IsConflict(err) {
			conditionConflicts.WithLabelValues("refused").Inc()
			return fmt.Errorf("%w: %w", errReadChanged, err)
		}
		return err
	}
	return nil
}

// errReadChanged marks a condition write refused because the node changed
// since the plan read it: not a failure, the plan is simply out of date.
var errReadChanged = errors.New("the node changed since the plan read it")

// replanAfter is how soon a tenant whose condition write was refused is
// planned again: its node's change may be one no watch delivers (another
// writer's PrerequisitesReady), and a change that is one enqueues it
// sooner anyway.
const replanAfter = 100 * time.Millisecond

// applyConditionAt applies condition c to node n, tested against
// resourceVersion rv.
func (r *Reconciler) applyConditionAt(ctx context.Context, t rollout.Tenant, n v2alpha1.Node, c *metav1.Condition, rv string) error {
	status := acv2alpha1.NodeStatus().WithConditions(metav1ac.Condition().
		WithType(c.Type).WithStatus(c.Status).WithReason(c.Reason).WithMessage(c.Message).
		WithObservedGeneration(c.ObservedGeneration).WithLastTransitionTime(c.LastTransitionTime))
	apply := &withAnswer{nodeApplyConfiguration: acv2alpha1.Frontend(n.GetName(), n.GetNamespace()).WithStatus(status).WithResourceVersion(rv)}
	var written v2alpha1.Node = &v2alpha1.Frontend{}
	if n.NodeKind() == v2alpha1.KindBackend {
		apply.nodeApplyConfiguration = acv2alpha1.Backend(n.GetName(), n.GetNamespace()).WithStatus(status).WithResourceVersion(rv)
		written = &v2alpha1.Backend{}
	}
	apiWrites.WithLabelValues("apply", resourceOf(n)+"/status").Inc()
	conditionWrites.WithLabelValues(c.Reason).Inc()
	err := r.Client.Status().Apply(ctx, apply, client.FieldOwner(v2alpha1.FieldManager), client.ForceOwnership)
	if err != nil {
		return fmt.Errorf("applying the %s condition of %s %s: %w", v2alpha1.ConditionPrerequisitesReady, n.NodeKind(), n.GetName(), err)
	}
	if err := json.Unmarshal(apply.answer, written); err != nil {
		return fmt.Errorf("reading the answer to the %s condition of %s %s: %w", v2alpha1.ConditionPrerequisitesReady, n.NodeKind(), n.GetName(), err)
	}
	r.own.remember(t, written)
	return nil
}

// unchangedForCondition reads node n from the API server and reports
// whether everything the plan reads of a node is as the plan read it: the
// same object (UID), spec (generation), deletion, labels, annotations and
// PrerequisitesReady condition. It returns the node as read, and an error
// when it could not be read (a node deleted since is not unchanged).
func (r *Reconciler) unchangedForCondition(ctx context.Context, n v2alpha1.Node) (v2alpha1.Node, bool, error) {
	if r.Fresh == nil {
		return nil, false, nil
	}
	now := v2alpha1.NewNode(n.NodeKind()) // empty: a decode into a copy of n could keep what is gone since
	if err := r.Fresh.Get(ctx, client.ObjectKeyFromObject(n), now); apierrors.IsNotFound(err) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	}
	was, is := rollout.PrerequisitesCondition(n), rollout.PrerequisitesCondition(now)
	return now, now.GetUID() == n.GetUID() && now.GetGeneration() == n.GetGeneration() &&
		equality.Semantic.DeepEqual(now.GetDeletionTimestamp(), n.GetDeletionTimestamp()) &&
		maps.Equal(now.GetLabels(), n.GetLabels()) && sameAnnotations(now.GetAnnotations(), n.GetAnnotations()) &&
		equality.Semantic.DeepEqual(was, is), nil
}

// sameAnnotations reports whether two versions of a node's annotations are
// alike as the plan reads them: a node read fresh carries its last-applied
// manifest and rollout-history whole, the cache's cut (StripNode).
func sameAnnotations(a, b map[string]string) bool {
	a, b = maps.Clone(a), maps.Clone(b)
	rollout.CutForCache(a)
	rollout.CutForCache(b)
	return maps.Equal(a, b)
}
