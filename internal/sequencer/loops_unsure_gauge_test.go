package sequencer

import (
	"context"
	"testing"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/medallia/express-sequencer/internal/rollout"
)

// express_sequencer_tenants_loops_unsure counts the tenants in enforce
// whose last plan cut its loop searches short, by why: a tenant counts once
// however many nodes it has, moves between labels as its plans change, and
// leaves the count once a plan searches to the end (or it has no node
// left); a tenant in audit, which nothing holds, is not counted. The gauge
// names no tenant: the leader logs each as it starts and stops.
func TestTheTenantsWhoseLoopSearchesWereCutShortAreCountedOnceEachAndLogged(t *testing.T) {
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loops_unsure"}, []string{"why"})
	r := &Reconciler{}
	r.loopsUnsure.gauge = gauge
	var logged []string
	ctx := log.IntoContext(context.Background(), funcr.New(func(_, args string) { logged = append(logged, args) }, funcr.Options{}))
	decisions := func(why string, nodes ...string) []rollout.Decision {
		var out []rollout.Decision
		for _, n := range nodes {
			out = append(out, rollout.Decision{Node: n, LoopsUnsure: why})
		}
		return out
	}
	count := func(why string) float64 { return testutil.ToFloat64(gauge.WithLabelValues(why)) }
	a, b, c := rollout.Tenant{Namespace: "a", ClusterName: "acme"}, rollout.Tenant{Namespace: "b", ClusterName: "acme"}, rollout.Tenant{Namespace: "c", ClusterName: "acme"}

	r.count(ctx, a, decisions(rollout.LoopsOutOfBudget, "acme-be", "acme-fe1", "acme-fe2"), false)
	r.count(ctx, b, decisions(rollout.LoopsOutOfBudget, "acme-be"), false)
	r.count(ctx, c, decisions(rollout.LoopsOutOfBudget, "acme-be"), true)
	assert.Equal(t, 2.0, count(rollout.LoopsOutOfBudget), "two tenants in enforce, each once")
	r.count(ctx, a, decisions(rollout.LoopsOutOfBudget, "acme-be", "acme-fe1", "acme-fe2"), false)
	assert.Len(t, logged, 2, "each logged as it starts, once: %v", logged)
	assert.Contains(t, logged[0], `"namespace"="a"`)
	assert.Contains(t, logged[0], `"why"="budget"`)

	r.count(ctx, b, decisions(rollout.LoopsOutOfSteps, "acme-be"), false)
	assert.Equal(t, 1.0, count(rollout.LoopsOutOfBudget))
	assert.Equal(t, 1.0, count(rollout.LoopsOutOfSteps))

	r.count(ctx, a, decisions("", "acme-be", "acme-fe1", "acme-fe2"), false)
	r.count(ctx, b, nil, false)
	assert.Equal(t, 0.0, count(rollout.LoopsOutOfBudget), "searched to the end")
	assert.Equal(t, 0.0, count(rollout.LoopsOutOfSteps), "no node left")
	assert.Len(t, logged, 5, "b's new why, a's and b's ends: %v", logged)
	assert.Contains(t, logged[4], "searched to the end again")
}
