package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

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

// kube-apiserver's histogram of reads that waited for its watch cache, read
// by resource (group appended), and what a stretch of a run added to it.
func TestTheWatchCachesWaitsAreReadByResource(t *testing.T) {
	const text = `# TYPE apiserver_watch_cache_read_wait_seconds histogram
apiserver_watch_cache_read_wait_seconds_bucket{group="express.medallia.com",resource="frontends",le="0.005"} 2
apiserver_watch_cache_read_wait_seconds_bucket{group="express.medallia.com",resource="frontends",le="0.025"} 3
apiserver_watch_cache_read_wait_seconds_bucket{group="express.medallia.com",resource="frontends",le="0.05"} 5
apiserver_watch_cache_read_wait_seconds_bucket{group="express.medallia.com",resource="frontends",le="0.1"} 9
apiserver_watch_cache_read_wait_seconds_bucket{group="express.medallia.com",resource="frontends",le="+Inf"} 10
apiserver_watch_cache_read_wait_seconds_sum{group="express.medallia.com",resource="frontends"} 0.6
apiserver_watch_cache_read_wait_seconds_count{group="express.medallia.com",resource="frontends"} 10
apiserver_watch_cache_read_wait_seconds_bucket{group="",resource="pods",le="0.05"} 4
apiserver_watch_cache_read_wait_seconds_bucket{group="",resource="pods",le="+Inf"} 4
apiserver_watch_cache_read_wait_seconds_sum{group="",resource="pods"} 0.04
apiserver_watch_cache_read_wait_seconds_count{group="",resource="pods"} 4
`
	waits, err := cacheWaits(strings.NewReader(text))
	require.NoError(t, err)
	fe := waits["frontends.express.medallia.com"]
	assert.Equal(t, cacheWait{Reads: 10, Waited: 600 * time.Millisecond, Over50ms: 5}, fe)
	assert.Equal(t, 60*time.Millisecond, fe.Mean())
	assert.Equal(t, uint64(4), waits["pods"].Reads)

	before := map[string]cacheWait{"frontends.express.medallia.com": {Reads: 4, Waited: 100 * time.Millisecond, Over50ms: 1}, "pods": {Reads: 4, Waited: 40 * time.Millisecond}}
	since := cacheWaitsSince(before, waits)
	assert.Equal(t, cacheWait{Reads: 6, Waited: 500 * time.Millisecond, Over50ms: 4}, since["frontends.express.medallia.com"])
	assert.NotContains(t, since, "pods", "no read of pods since")

	none, err := cacheWaits(strings.NewReader("# TYPE apiserver_request_total counter\napiserver_request_total 3\n"))
	require.NoError(t, err)
	assert.Nil(t, none, "no watch cache: no histogram")
	assert.Nil(t, cacheWaitsSince(before, none))
}
