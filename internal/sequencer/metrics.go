package sequencer

import (
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/medallia/express-sequencer/internal/audit"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// Prometheus metrics of the sequencer, served with controller-runtime's on
// the manager's metrics endpoint.
var (
	gatedNodes = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "express_sequencer_gated_nodes",
		Help: "Nodes held by the sequencer's gate, by the reason of their PrerequisitesReady condition.",
	}, []string{"reason"})

	nodesByReason = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "express_sequencer_nodes",
		Help: "Every node the sequencer plans, gated or not, by the reason of its PrerequisitesReady condition (a stalled rollout shows as ProgressDeadlineExceeded).",
	}, []string{"reason"})

	loopsUnsureTenants = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "express_sequencer_tenants_loops_unsure",
		Help: "Tenants in enforce whose last plan cut its wait-for loop searches short, by why: budget (the pass's searches ran out of their budget: every wait is kept, so a crashed node on a loop does not go first) or steps (a search ran out of its steps: that wait is kept). Either way a rollout in flight's new pods wait for its predecessors. Nothing goes out of order; the tenant may stall. The leader logs each tenant as it starts and stops.",
	}, []string{"why"})

	releaseLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "express_sequencer_release_latency_seconds",
		Help:    "Time from the sequencer observing the change that met a node's last prerequisite to the node's gate being removed.",
		Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	})

	releaseSteps = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "express_sequencer_release_step_seconds",
		Help:    "Where the time of a reconcile that releases a node or pods goes, by step: queue (from the change being seen to the reconcile starting), plan (reading the cache and planning), scoped_read (the workload a release rests on, read by name: --scoped-reads), fresh_read (the consistent reads of the whole tenant a release is planned on), records (the RolloutComplete conditions written before any release), release (each node released: its gate patch, its pods and its condition), rest (the other nodes' conditions and pod releases).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
	}, []string{"step"})

	admissionSteps = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "express_sequencer_admission_step_seconds",
		Help:    "Where the time of the webhooks that read the tenant from the API server goes, by webhook (pods: a new Express pod held or let go; release-guard: a release judged again as it is written) and step: fresh_read (the consistent reads of the tenant the decision rests on) and decide (planning on them).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5},
	}, []string{"webhook", "step"})

	releases = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "express_sequencer_releases_total",
		Help: "Gates the sequencer removed, by reason (Released, PrerequisitesIgnored, NodeDown).",
	}, []string{"reason"})

	modeSwitches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "express_sequencer_mode_switch_writes_total",
		Help: "Writes that carried nodes and pods across a change of their namespace's sequencing mode, by action: lift (a node's gate, in audit), lift-pod (a pod's scheduling gate, in audit), adopt (a node audit left rolling a target, its release recorded, in enforce), gate (a node audit left with a target not started, gated, in enforce).",
	}, []string{"action"})

	podReleases = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "express_sequencer_pod_releases_total",
		Help: "Pod scheduling gates the sequencer removed (recovering nodes whose provisioning prerequisites became Ready).",
	})

	apiWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "express_sequencer_api_writes_total",
		Help: "Writes the sequencer made to the API server, by verb and resource: gate patches, condition applies, pod gate patches, Events.",
	}, []string{"verb", "resource"})

	conditionWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "express_sequencer_condition_writes_total",
		Help: "PrerequisitesReady conditions the sequencer wrote, by the reason written.",
	}, []string{"reason"})

	eventsDropped = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "express_sequencer_events_dropped_total",
		Help: "Events not written because the queue of Events to write was full (the API server slower than the sequencer's state changes).",
	})

	eventsFailed = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "express_sequencer_event_write_failures_total",
		Help: "Events the API server refused, or did not take after every retry.",
	})

	conditionConflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "express_sequencer_condition_conflicts_total",
		Help: "PrerequisitesReady writes refused because the node changed since the plan read it (409 Conflict), by outcome: retried (only what the plan does not read had changed, such as the Express operator's status) or refused (the node, its annotations or the condition itself had changed: the tenant is planned again).",
	}, []string{"outcome"})

	partialReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "express_sequencer_fresh_reads_partial_total",
		Help: "Fresh reads (the sequencer's, the pod webhook's, the release guard's) that went on without what RBAC forbade them, by what was missing: statefulsets (pods taken as they are, however many their StatefulSet wants) or machines (pods taken as Ready on a machine that may be gone).",
	}, []string{"missing"})

	releaseReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "express_sequencer_release_reads_total",
		Help: "Reconciles whose plan releases a node or pods or records a rollout complete, by the fresh read it was planned on: decision (the workload of the nodes it rests on, by name, the rest from the cache: --scoped-reads) or tenant (consistent LISTs of the whole tenant), and, for a tenant read where a decision read was tried, why it was not enough (naming: a node's StatefulSet is not named after it or does not own its pods; wider: the plan rested on more nodes than were read; cache: the cache could not be compared with the sequencer's own writes; guard: the release guard's webhooks are not registered to judge every release in the namespace, or it is in audit mode; moved: the workload read by name, read again, had changed — it was not one moment; none otherwise).",
	}, []string{"read", "fallback"})

	podAdmissionReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "express_sequencer_pod_admission_reads_total",
		Help: "New Express pods the pod webhook answered with --pod-reads-by-name, by the read the answer was made on: decision (the nodes the pods' start rests on and their workload, read by name) or tenant (the whole tenant read, as without the flag), and by what the read by name found (none: the pod may start; held: it may not — gated on it in an enforcing namespace, answered on the whole tenant in audit, where the mode could not be read or for a pod bound to a machine; or why it could not answer — moved: read again, what the pod's start rests on had changed; naming: a node's StatefulSet is not named after it or does not own its pods; wider: its start rests on more nodes than are read by name; cache: the node is not in the cache, or not as the cache has it on the API server (gone, or in another tenant); error: the read by name failed).",
	}, []string{"read", "fallback"})

	departuresUndated = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "express_sequencer_departures_undated",
		Help: "1 while the node validating webhooks are not sent every deletion of a node (their ValidatingWebhookConfiguration missing, stale or edited), so deletions are not dated and a deletion followed by a change may be released out of order; 0 otherwise. Set by the leader.",
	})

	convergenceRecords = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "express_sequencer_convergence_records_total",
		Help: "Gated nodes recorded converged on the target of their latest release, a change having come before their RolloutComplete.",
	})

	reconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "express_sequencer_reconcile_errors_total",
		Help: "Tenant reconciles that failed, by step (gather, gate, record, pod, status).",
	}, []string{"step"})
)

// collectors are every metric the sequencer exports.
var collectors = []prometheus.Collector{gatedNodes, nodesByReason, loopsUnsureTenants, releaseLatency, releaseSteps, admissionSteps, releases, podReleases, modeSwitches, apiWrites, apiRequests, conditionWrites, conditionConflicts, eventsDropped, eventsFailed, partialReads, releaseReads, podAdmissionReads, departuresUndated, convergenceRecords, reconcileErrors}

// ObserveAdmissionStep records that step of webhook took d, for
// express_sequencer_admission_step_seconds.
func ObserveAdmissionStep(webhook, step string, d time.Duration) {
	admissionSteps.WithLabelValues(webhook, step).Observe(d.Seconds())
}

// CountPodAdmissionRead counts one pod admission made with --pod-reads-by-name,
// by the read it was answered on — by name where byName, the whole tenant
// otherwise — and what the read by name found where it did not let the pod
// start: held, or why it could not answer (why's label; error where err is
// set).
func CountPodAdmissionRead(byName, held bool, why rollout.Fallback, err error) {
	read, found := rollout.ReadTenant, "none"
	if byName {
		read = rollout.ReadDecision
	}
	switch {
	case err != nil:
		found = "error"
	case !why.None():
		found = why.Label
	case held:
		found = "held"
	}
	podAdmissionReads.WithLabelValues(read, found).Inc()
}

// MetricNames are the names of the metrics express-sequencer exports (the
// sequencer's and the order auditor's), read from their descriptions, for
// alerting rules and their tests.
func MetricNames() []string {
	var out []string
	for _, c := range append(slices.Clone(collectors), audit.Collectors...) {
		ch := make(chan *prometheus.Desc, 1)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			// Desc{fqName: "express_sequencer_…", help: …}
			if _, rest, ok := strings.Cut(d.String(), `fqName: "`); ok {
				name, _, _ := strings.Cut(rest, `"`)
				out = append(out, name)
			}
		}
	}
	return out
}

func init() {
	metrics.Registry.MustRegister(collectors...)
}

// gatedCounts keeps each tenant's nodes by reason, so a gauge is the sum
// over tenants without listing them all on every reconcile.
type gatedCounts struct {
	gauge    *prometheus.GaugeVec
	mu       sync.Mutex
	byTenant map[rollout.Tenant]map[string]int
	total    map[string]int
}

// set sets tenant t's counts and returns those it had.
func (g *gatedCounts) set(t rollout.Tenant, counts map[string]int) (before map[string]int) {
	if g.gauge == nil {
		return nil // a Reconciler not set up with a manager exports nothing
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.byTenant == nil {
		g.byTenant, g.total = map[rollout.Tenant]map[string]int{}, map[string]int{}
	}
	before = g.byTenant[t]
	for reason, n := range g.byTenant[t] {
		g.total[reason] -= n
	}
	for reason, n := range counts {
		g.total[reason] += n
	}
	if len(counts) == 0 {
		delete(g.byTenant, t)
	} else {
		g.byTenant[t] = counts
	}
	for reason, n := range g.total {
		g.gauge.WithLabelValues(reason).Set(float64(n))
	}
	return before
}
