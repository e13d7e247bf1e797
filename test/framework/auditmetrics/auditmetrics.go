// Package auditmetrics reads the order auditor's metrics from the registry
// of the process the suites run express-sequencer in: how many violations
// and would-have-helds it counted, and whether it has judged every pod
// creation it saw.
package auditmetrics

import (
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Names of the auditor's metrics.
const (
	Violations = "express_sequencer_order_violations_total"
	WouldHold  = "express_sequencer_audit_would_hold_total"
	Pending    = "express_sequencer_audit_pending_pods"
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
// an error naming the count if it counted any violation.
func NoViolations(timeout time.Duration) error {
	if err := WaitJudged(timeout); err != nil {
		return err
	}
	n, err := Sum(Violations)
	if err != nil {
		return err
	}
	if n > 0 {
		return fmt.Errorf("the order auditor counted %v order violations where the order held (%s); its Warning Events of reason OrderViolation name them", n, Violations)
	}
	return nil
}
