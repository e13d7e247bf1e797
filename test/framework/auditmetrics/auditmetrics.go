// Package auditmetrics reads the order auditor's metrics from the registry
// of the process the suites run express-sequencer in: how many violations
// and would-have-helds it counted, and whether it has judged every pod
// creation it saw.
package auditmetrics

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// Names of the auditor's metrics.
const (
	Violations = "express_sequencer_order_violations_total"
	WouldHold  = "express_sequencer_audit_would_hold_total"
	Pending    = "express_sequencer_audit_pending_pods"
	Relists    = "express_sequencer_audit_relists_total"
)

// Sum is the value of metric name summed over its labels (0 when it has
// no series).
func Sum(name string) (float64, error) { return SumWhere(name, nil) }

// SumWhere is the value of metric name summed over the series whose
// labels include every label of match (0 when none has).
func SumWhere(name string, match map[string]string) (float64, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			matches := true
			for k, v := range match {
				matches = matches && labels[k] == v
			}
			switch {
			case !matches:
			case m.GetCounter() != nil:
				sum += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				sum += m.GetGauge().GetValue()
			}
		}
	}
	return sum, nil
}

// WaitJudged waits, at most timeout, until the auditor has judged every pod
// creation it saw and reported what it found.
func WaitJudged(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pending, err := Sum(Pending)
		if err != nil {
			return err
		}
		if pending == 0 {
			// A finding is reported right after the pass that judged it.
			time.Sleep(500 * time.Millisecond)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the order auditor still has %v pod creations to judge after %s", pending, timeout)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// NoViolations waits until the auditor has judged everything and returns
// an error naming the count, and what its OrderViolation Events say, if it
// counted any violation.
func NoViolations(ctx context.Context, c client.Reader, timeout time.Duration) error {
	if err := WaitJudged(timeout); err != nil {
		return err
	}
	n, err := Sum(Violations)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("the order auditor counted %v order violations where the order held (%s); its Warning Events say:\n%s", n, Violations, violationNotes(ctx, c))
	}
	return nil
}

// violationNotes are the OrderViolation Events in the cluster, one per
// line, oldest first: what the auditor saw start before what.
func violationNotes(ctx context.Context, c client.Reader) string {
	var list eventsv1.EventList
	if err := c.List(ctx, &list); err != nil {
		return "  (listing the Events failed: " + err.Error() + ")"
	}
	var lines []string
	for _, e := range list.Items {
		if e.Reason != v2alpha1.ReasonOrderViolation {
			continue
		}
		lines = append(lines, fmt.Sprintf("  %s %s/%s: %s", e.CreationTimestamp.UTC().Format(time.RFC3339),
			e.Regarding.Namespace, e.Regarding.Name, e.Note))
	}
	if len(lines) == 0 {
		return "  (no OrderViolation Event is left)"
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}
