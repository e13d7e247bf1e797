// Command dashboard writes express-sequencer's Grafana dashboard (JSON) to
// standard output, built with Grafana's foundation SDK: `make manifests`
// writes it to config/grafana and the chart's files, and `make verify`
// fails when they differ from what this builds.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"

	"github.com/medallia/express-sequencer/internal/rollout"
)

// rate is the range of every rate: Grafana's, at least four scrapes.
const rate = "[$__rate_interval]"

// datasource is the dashboard's Prometheus, chosen by its variable.
var datasource = common.DataSourceRef{Type: cog.ToPtr("prometheus"), Uid: cog.ToPtr("${datasource}")}

func query(expr, legend string) *prometheus.DataqueryBuilder {
	return prometheus.NewDataqueryBuilder().Expr(expr).LegendFormat(legend).Datasource(datasource)
}

func series(title, unit, description string, queries ...*prometheus.DataqueryBuilder) *timeseries.PanelBuilder {
	p := timeseries.NewPanelBuilder().Title(title).Unit(unit).Description(description).Min(0).Height(8).Span(12).Datasource(datasource)
	for _, q := range queries {
		p = p.WithTarget(q)
	}
	return p
}

func build() (dashboard.Dashboard, error) {
	return dashboard.NewDashboardBuilder("express-sequencer").
		Uid("express-sequencer").
		Tags([]string{"express", "express-sequencer"}).
		Refresh("30s").
		Time("now-3h", "now").
		Timezone(common.TimeZoneBrowser).
		Description("Dependency-ordered rollouts of Express tenants: nodes by reason, held and stuck nodes, release and admission latency, the sequencer's writes and API calls, Events dropped, the leader.").
		WithVariable(dashboard.NewDatasourceVariableBuilder("datasource").Label("Data source").Type("prometheus")).
		WithRow(dashboard.NewRowBuilder("Rollouts")).
		WithPanel(series("Nodes by reason", "short",
			"Every live node by the reason of its PrerequisitesReady condition (gated and released).",
			query(`sum by (reason) (express_sequencer_nodes)`, "{{reason}}")).
			Stacking(common.NewStackingConfigBuilder().Mode(common.StackingModeNormal))).
		WithPanel(series("Nodes held and stuck", "short",
			"Stuck: a node that cannot go on by itself (a cycle, a missing prerequisite, a pin nothing meets, past its progress deadline). Held: gated nodes waiting (paused, settling, a change landing, a predecessor not Ready). Counted in nodes: a tenant is stuck when any of its nodes is.",
			query(`sum(express_sequencer_nodes{reason=~"`+strings.Join(rollout.StuckReasons(), "|")+`"})`, "stuck"),
			query(`sum(express_sequencer_gated_nodes{reason=~"RolloutPaused|Settling|ChangeLanding|WaitingForPrerequisite"})`, "held"))).
		WithPanel(heatmap.NewPanelBuilder().Title("Release latency").Height(8).Span(12).Datasource(datasource).
			Description("From the event that let a node go (its last prerequisite Ready on target) to its gate removed.").
			WithTarget(query(`sum by (le) (rate(express_sequencer_release_latency_seconds_bucket`+rate+`))`, "{{le}}").Format(prometheus.PromQueryFormatHeatmap))).
		WithPanel(series("Release latency p50 / p99", "s", "",
			query(`histogram_quantile(0.5, sum by (le) (rate(express_sequencer_release_latency_seconds_bucket`+rate+`)))`, "p50"),
			query(`histogram_quantile(0.99, sum by (le) (rate(express_sequencer_release_latency_seconds_bucket`+rate+`)))`, "p99"))).
		WithPanel(series("Releases", "ops", "Releases of nodes by reason, and of held pods.",
			query(`sum by (reason) (rate(express_sequencer_releases_total`+rate+`))`, "{{reason}}"),
			query(`sum(rate(express_sequencer_pod_releases_total`+rate+`))`, "pods"))).
		WithPanel(series("Reconcile errors", "ops", "By step; a refused release (the release guard) counts under gate or pod.",
			query(`sum by (step) (rate(express_sequencer_reconcile_errors_total`+rate+`))`, "{{step}}"))).
		WithRow(dashboard.NewRowBuilder("Admission")).
		WithPanel(series("Admission latency p99 by webhook", "s", "The webhooks' own handling time (controller-runtime).",
			query(`histogram_quantile(0.99, sum by (le, webhook) (rate(controller_runtime_webhook_latency_seconds_bucket`+rate+`)))`, "{{webhook}}"))).
		WithPanel(series("Admission requests by webhook and code", "ops", "",
			query(`sum by (webhook, code) (rate(controller_runtime_webhook_requests_total`+rate+`))`, "{{webhook}} {{code}}"))).
		WithPanel(series("Where a fresh admission's time goes", "s", "Median time of each step of the webhooks that read the tenant from the API server: the pod webhook (a new Express pod) and the release guard (a release judged again); fresh_read waits for the API server's consistent reads.",
			query(`histogram_quantile(0.5, sum by (le, webhook, step) (rate(express_sequencer_admission_step_seconds_bucket`+rate+`)))`, "{{webhook}} {{step}}"))).
		WithRow(dashboard.NewRowBuilder("The sequencer's load")).
		WithPanel(series("Writes", "ops", "The sequencer's writes by verb and resource, and its condition writes that met a conflict: retried (only the Express operator's own status had changed) or refused (the node or its condition had changed since the plan read it; planned again).",
			query(`sum by (verb, resource) (rate(express_sequencer_api_writes_total`+rate+`))`, "{{verb}} {{resource}}"),
			query(`sum by (outcome) (rate(express_sequencer_condition_conflicts_total`+rate+`))`, "conflict {{outcome}}"))).
		WithPanel(series("API calls", "ops", "Every request of the process's client, by method and code (client-go).",
			query(`sum by (method, code) (rate(rest_client_requests_total`+rate+`))`, "{{method}} {{code}}"))).
		WithPanel(series("API calls by part", "ops", "The same requests by the part that sent them and their verb: sequencer (the reconciles' fresh reads and writes), release-guard and pods (the webhooks' fresh reads of the tenant), auditor, other (the caches' lists and watches, leader election, Events, the node webhooks' reads). Which part a rise of API calls comes from; the resources are on express_sequencer_api_requests_total.",
			query(`sum by (caller, verb) (rate(express_sequencer_api_requests_total`+rate+`))`, "{{caller}} {{verb}}"))).
		WithPanel(series("Events not written", "ops", "Events dropped with the queue full, or refused by the API server.",
			query(`sum(rate(express_sequencer_events_dropped_total`+rate+`))`, "dropped"),
			query(`sum(rate(express_sequencer_event_write_failures_total`+rate+`))`, "refused"))).
		WithPanel(stat.NewPanelBuilder().Title("Leader").Height(8).Span(12).Datasource(datasource).
			Description("1 while a replica leads the sequencer (its Lease). 0 or no data: nothing is released.").
			WithTarget(query(`max(leader_election_master_status{name="express-sequencer.express.medallia.com"})`, "leader"))).
		Build()
}

func main() {
	d, err := build()
	if err == nil {
		var data []byte
		if data, err = json.MarshalIndent(d, "", "  "); err == nil {
			_, err = fmt.Printf("%s\n", data)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dashboard:", err)
		os.Exit(1)
	}
}
