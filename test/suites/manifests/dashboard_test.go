package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/medallia/express-sequencer/internal/sequencer"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// controllerRuntimeMetrics are the series of controller-runtime and
// client-go the binary exports beside its own and the dashboard reads.
var controllerRuntimeMetrics = []string{
	"controller_runtime_webhook_latency_seconds", "controller_runtime_webhook_requests_total",
	"rest_client_requests_total", "leader_election_master_status",
}

// dashboardQueries returns the PromQL of every panel's targets.
func dashboardQueries(t *testing.T, data []byte) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(data, &d))
	var out []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		require.NotEmpty(t, p.Targets, "panel %q has a query", p.Title)
		for _, target := range p.Targets {
			out = append(out, target.Expr)
		}
	}
	return out
}

// The Grafana dashboard: every query parses with Prometheus' own PromQL
// parser and names only series the binary exports; the chart ships the
// generated file, in a ConfigMap the Grafana sidecar picks up, when asked.
func TestTheGrafanaDashboardQueriesParseAndNameExportedSeries(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(controlplane.Root(), "config", "grafana", "express-sequencer-dashboard.json"))
	require.NoError(t, err)
	exported := append(sequencer.MetricNames(), controllerRuntimeMetrics...)
	queries := dashboardQueries(t, data)
	require.GreaterOrEqual(t, len(queries), 10)
	seen := map[string]bool{}
	for _, q := range queries {
		// Grafana replaces $__rate_interval before Prometheus sees the query.
		expr, err := parser.NewParser(parser.Options{}).ParseExpr(strings.ReplaceAll(q, "$__rate_interval", "1m"))
		if !assert.NoError(t, err, "%s", q) {
			continue
		}
		for _, sel := range parser.ExtractSelectors(expr) {
			for _, m := range sel {
				if m.Name != "__name__" {
					continue
				}
				name := strings.TrimSuffix(m.Value, "_bucket")
				seen[name] = true
				assert.True(t, slices.Contains(exported, name), "%q in %s is a series the binary exports", m.Value, q)
			}
		}
	}
	for _, want := range []string{"express_sequencer_nodes", "express_sequencer_release_latency_seconds", "controller_runtime_webhook_latency_seconds",
		"express_sequencer_api_writes_total", "express_sequencer_events_dropped_total", "leader_election_master_status"} {
		assert.True(t, seen[want], "the dashboard shows %s", want)
	}

	assert.Empty(t, chart(t, nil)["ConfigMap"]["express-sequencer-dashboard"], "off by default")
	h := chart(t, map[string]any{"grafanaDashboard": map[string]any{"enabled": true}})
	raw := h["ConfigMap"]["express-sequencer-dashboard"]
	require.NotEmpty(t, raw)
	var cm corev1.ConfigMap
	require.NoError(t, json.Unmarshal(raw, &cm))
	assert.Equal(t, "1", cm.Labels["grafana_dashboard"], "the Grafana sidecar's label")
	assert.JSONEq(t, string(data), cm.Data["express-sequencer.json"], "the chart ships the generated dashboard")
}
