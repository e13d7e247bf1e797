package audit

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Prometheus metrics of the order auditor, served on the manager's metrics
// endpoint.
var (
	violations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "express_sequencer_order_violations_total",
		Help: "Pods created while their node was gated, for a target the node did not run when the gate was added, by kind: rolled-while-gated (a StatefulSet made it: the Express operator rolled a gated node), pod-while-gated (no StatefulSet did: made by hand or outside the contract). 0 where the order held.",
	}, []string{"kind"})

	wouldHold = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "express_sequencer_audit_would_hold_total",
		Help: "In audit mode, node rollouts whose new target started while the sequencer's plan would still have held them: where enforcing would change what happens.",
	})

	pendingPods = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "express_sequencer_audit_pending_pods",
		Help: "Pod creations the auditor has not judged yet: their node's or StatefulSets' watch has not reached the pod's revision.",
	})

	unjudged = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "express_sequencer_audit_unjudged_pods_total",
		Help: "Pod creations the auditor could not judge, by why: relisted (first seen already changed — after a broken watch was listed again, or labelled into an Express node since — so its creation cannot be placed in the order), blind (created while its node was held, in revisions a broken watch may have hidden). Not violations: what the auditor could not see.",
	}, []string{"why"})

	relists = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "express_sequencer_audit_relists_total",
		Help: "Lists the auditor's watches made again after their first, by stream (pods, statefulsets, namespaces, Backend, Frontend): each mends a broken watch (a kube-apiserver restarted, a connection lost past the watch cache), and pods created in the revisions it may have hidden are not judged (express_sequencer_audit_unjudged_pods_total{why=\"blind\"}).",
	}, []string{"stream"})

	freshReads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "express_sequencer_audit_fresh_reads_total",
		Help: "Fresh reads the auditor made of a node and its namespace's StatefulSets, for a pod whose node's watches were quiet past the pod's revision.",
	})
)

// Collectors are every metric the auditor exports.
var Collectors = []prometheus.Collector{violations, wouldHold, pendingPods, unjudged, relists, freshReads}

func init() {
	metrics.Registry.MustRegister(Collectors...)
	for _, kind := range []string{KindRolledWhileGated, KindPodWhileGated} {
		violations.WithLabelValues(kind) // 0 until one is found: an alert's expression has a series to read
	}
	for _, why := range []string{UnjudgedRelisted, UnjudgedBlind} {
		unjudged.WithLabelValues(why)
	}
}
