package main

import (
	"fmt"
	"io"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
)

// scrape reads a /metrics endpoint in the Prometheus text format.
func scrape(url string) (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get(url) //nolint:noctx // a local endpoint, read once
	if err != nil {
		return nil, fmt.Errorf("reading the metrics at %s: %w", url, err)
	}
	defer resp.Body.Close()
	return parseMetrics(resp.Body)
}

// parseMetrics parses metrics in the Prometheus text format.
func parseMetrics(r io.Reader) (map[string]*dto.MetricFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing metrics: %w", err)
	}
	return families, nil
}

// label is the value of label name of m, "" when it has none.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// value is a counter's or a gauge's value.
func value(m *dto.Metric) float64 {
	if c := m.GetCounter(); c != nil {
		return c.GetValue()
	}
	if g := m.GetGauge(); g != nil {
		return g.GetValue()
	}
	return m.GetUntyped().GetValue()
}

// sum adds up the samples of family name in families for which keep says
// so (every sample when keep is nil); false when there is no such family.
func sum(families map[string]*dto.MetricFamily, name string, keep func(*dto.Metric) bool) (float64, bool) {
	f, ok := families[name]
	if !ok {
		return 0, false
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		if keep == nil || keep(m) {
			total += value(m)
		}
	}
	return total, true
}

// awaitJudged waits, at most timeout, until the order auditor behind url
// has judged every pod creation it saw.
func awaitJudged(url string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pending, err := metricSum(url, auditmetrics.Pending)
		if err != nil {
			return err
		}
		if pending == 0 {
			time.Sleep(time.Second) // a finding is reported right after the pass that judged it
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the order auditor still has %v pod creations to judge after %s", pending, timeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
