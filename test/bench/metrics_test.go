package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const sampleMetrics = `# HELP express_sequencer_api_writes_total Writes.
# TYPE express_sequencer_api_writes_total counter
express_sequencer_api_writes_total{resource="frontends",verb="patch"} 14
express_sequencer_api_writes_total{resource="frontends/status",verb="apply"} 40
express_sequencer_api_writes_total{resource="events",verb="create"} 30
# TYPE express_sequencer_condition_writes_total counter
express_sequencer_condition_writes_total{reason="Released"} 16
express_sequencer_condition_writes_total{reason="RolloutComplete"} 16
# TYPE express_sequencer_condition_conflicts_total counter
express_sequencer_condition_conflicts_total{outcome="retried"} 3
express_sequencer_condition_conflicts_total{outcome="refused"} 1
# TYPE express_sequencer_events_dropped_total counter
express_sequencer_events_dropped_total 2
# TYPE express_sequencer_release_step_seconds histogram
express_sequencer_release_step_seconds_bucket{step="plan",le="0.001"} 3
express_sequencer_release_step_seconds_bucket{step="plan",le="+Inf"} 4
express_sequencer_release_step_seconds_sum{step="plan"} 0.0025
express_sequencer_release_step_seconds_count{step="plan"} 4
# TYPE express_sequencer_admission_step_seconds histogram
express_sequencer_admission_step_seconds_bucket{webhook="pods",step="fresh_read",le="+Inf"} 2
express_sequencer_admission_step_seconds_sum{webhook="pods",step="fresh_read"} 0.1
express_sequencer_admission_step_seconds_count{webhook="pods",step="fresh_read"} 2
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="h",method="GET"} 10
rest_client_requests_total{code="201",host="h",method="POST"} 5
`

func TestTheSequencersMetricsAreReadByNameAndLabel(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, sampleMetrics)
	}))
	defer server.Close()

	got, err := writes(server.URL)
	require.NoError(t, err)
	assert.Equal(t, map[string]int{
		"patch frontends": 14, "apply frontends/status": 40, "create events": 30,
		conditionPrefix + "Released": 16, conditionPrefix + "RolloutComplete": 16,
		conflictPrefix + "retried": 3, conflictPrefix + "refused": 1,
		eventsDropped:                  2,
		stepSum + " plan":              2500,
		stepCount + " plan":            4,
		stepSum + " pods/fresh_read":   100000,
		stepCount + " pods/fresh_read": 2,
	}, got)

	calls, err := metricSum(server.URL, "rest_client_requests_total")
	require.NoError(t, err)
	assert.Equal(t, 15.0, calls)
	_, err = metricSum(server.URL, "go_goroutines")
	assert.ErrorContains(t, err, "no go_goroutines")
}

func TestMetricsThatDoNotParseAreAnError(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, "express_sequencer_api_writes_total{verb=\"patch\" 14\n")
	}))
	defer server.Close()
	_, err := writes(server.URL)
	assert.ErrorContains(t, err, "parsing metrics")
}
