package audit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
	"github.com/medallia/express-sequencer/test/framework/tenant"
)

// An operator that names its StatefulSets otherwise ("acme-fe1-set")
// breaks the contract's naming rule: the sequencer cannot read a node's
// StatefulSet by name, so each release that rests on such a node reads the
// whole tenant, as every release did before the rule. The order holds —
// each node of the change to all starts after the one before it is Ready,
// and the auditor counts nothing — and each node's condition says why its
// tenant is read whole.
func TestAnOperatorThatNamesItsStatefulSetsOtherwiseIsReadWholeAndKeepsTheOrder(t *testing.T) {
	ns := namespace(t, expressoperator.Breakage{NamesSetsOtherwise: true}, nil)
	violations := counted(t, auditmetrics.Violations)
	whole := func() float64 {
		n, err := auditmetrics.SumWhere("express_sequencer_release_reads_total", map[string]string{"read": rollout.ReadTenant, "fallback": "naming"})
		require.NoError(t, err)
		return n
	}
	before := whole()
	tenants.Create(t, ns, 4, v1, nil)
	tenants.WaitSettled(t, ns, 4, 2*time.Minute, nil)
	readyAfter.Store(ns, time.Second)
	mark := time.Now()
	tenants.SetVersion(t, ns, v2, tenant.Keys(4)...)
	tenants.WaitSettled(t, ns, 4, 2*time.Minute, nil)

	order := []string{"fe1", "fe2", "be", "fe3"}
	for i, k := range order[1:] {
		start := firstStart(ns, k, mark)
		require.False(t, start.IsZero(), "%s rolled", k)
		assert.False(t, readyBefore(t, ns, order[i], mark, start).IsZero(), "%s started at %s, before %s was Ready", k, start.Format(time.StampMilli), order[i])
	}
	assert.Greater(t, whole(), before, "releases read the tenant whole: no StatefulSet is named after its node")
	fe1 := tenant.Node(ns, "fe1")
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(fe1), fe1))
	if c := tenant.Condition(fe1); assert.NotNil(t, c) {
		assert.Equal(t, v2alpha1.ReasonRolloutComplete, c.Reason)
		assert.Contains(t, c.Message, "its pods' StatefulSet "+tenant.ClusterName+"-fe1-set is not named after it")
	}
	judged(t)
	assert.Equal(t, violations, counted(t, auditmetrics.Violations), "nothing rolled while gated")
}
