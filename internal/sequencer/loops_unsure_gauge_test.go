package sequencer

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"

	"github.com/medallia/express-sequencer/internal/rollout"
)

// express_sequencer_tenants_loops_unsure counts the tenants whose last plan
// cut its loop searches short, by why: a tenant counts once however many
// nodes it has, moves between labels as its plans change, and leaves the
// count once a plan searches to the end (or it has no node left).
func TestTheTenantsWhoseLoopSearchesWereCutShortAreCountedOnceEach(t *testing.T) {
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "loops_unsure"}, []string{"why"})
	r := &Reconciler{}
	r.loopsUnsure.gauge = gauge
	decisions := func(why string, nodes ...string) []rollout.Decision {
		var out []rollout.Decision
		for _, n := range nodes {
			out = append(out, rollout.Decision{Node: n, LoopsUnsure: why})
		}
		return out
	}
	count := func(why string) float64 { return testutil.ToFloat64(gauge.WithLabelValues(why)) }
	a, b := rollout.Tenant{Namespace: "a", ClusterName: "acme"}, rollout.Tenant{Namespace: "b", ClusterName: "acme"}

	r.count(a, decisions(rollout.LoopsOutOfBudget, "acme-be", "acme-fe1", "acme-fe2"))
	r.count(b, decisions(rollout.LoopsOutOfBudget, "acme-be"))
	assert.Equal(t, 2.0, count(rollout.LoopsOutOfBudget), "two tenants, each once")

	r.count(b, decisions(rollout.LoopsOutOfSteps, "acme-be"))
	assert.Equal(t, 1.0, count(rollout.LoopsOutOfBudget))
	assert.Equal(t, 1.0, count(rollout.LoopsOutOfSteps))

	r.count(a, decisions("", "acme-be", "acme-fe1", "acme-fe2"))
	r.count(b, nil)
	assert.Equal(t, 0.0, count(rollout.LoopsOutOfBudget), "searched to the end")
	assert.Equal(t, 0.0, count(rollout.LoopsOutOfSteps), "no node left")
}
