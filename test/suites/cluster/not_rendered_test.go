package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// render applies a render of rollout-id id to the nodes ks: a new
// configChangeset, the id and the nodes it renders, as the tenant chart
// does.
func render(t *testing.T, ns, id string, ks ...string) {
	t.Helper()
	names := make([]string, len(ks))
	for i, k := range ks {
		names[i] = "acme-" + k
	}
	update(t, ns, func(n v2alpha1.Node) {
		n.NodeSpec().ConfigChangeset = id
		withAnnotation(v2alpha1.AnnotationRolloutID, id)(n)
		withAnnotation(v2alpha1.AnnotationRenderedNodes, strings.Join(names, ","))(n)
	}, ks...)
}

// landingTimedOut counts the Released Events of node name that say the
// release proceeded past the landing timeout.
func landingTimedOut(t *testing.T, ns, name string) int {
	t.Helper()
	count := 0
	for _, note := range releaseMessages(t, ns, name) {
		if strings.Contains(note, "did not fully land within the landing timeout") {
			count++
		}
	}
	return count
}

// fe4 is removed from the tenant's values, and Argo CD does not prune it:
// it keeps rollout-id r1 while the chart renders r2, and then r3, to the
// other nodes, saying which nodes it renders. Neither change waits for fe4
// (the landing timeout, 20 s here, never passes): each rolls as soon as it
// has landed on the nodes it renders, and fe4's condition says it is no
// part of them.
func TestANodeTheChartNoLongerRendersHoldsNoChange(t *testing.T) {
	ctx := context.Background()
	ns := settledTenant(t, 5, 1)
	render(t, ns, "r1", keys(5)...)
	waitSettled(t, ns)
	rendered := keys(4)
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := watchOrder(watchCtx, t, ns)
	since := time.Now()

	for _, id := range []string{"r2", "r3"} {
		mark := time.Now()
		render(t, ns, id, rendered...)
		waitSettled(t, ns)
		assert.Equal(t, "fe1 fe2 be fe3", starts(ns, mark), "%s rolls in the upgrade order", id)
	}
	checkOrder(t, log.snapshot(), since, 1)
	assert.Zero(t, landingTimedOut(t, ns, "acme-fe1"), "no change waited for fe4: %v", releaseMessages(t, ns, "acme-fe1"))
	assert.Len(t, releaseMessages(t, ns, "acme-fe1"), 4, "fe1 released for its first rollout, r1, r2 and r3")
	fe4 := node(ns, "fe4")
	require.True(t, waitFor(10*time.Second, func() bool {
		return harness.Client.Get(ctx, client.ObjectKeyFromObject(fe4), fe4) == nil && condition(fe4) != nil &&
			strings.Contains(condition(fe4).Message, "not in the tenant chart's latest render (rollout-id r3")
	}), "fe4's condition says it is no part of the render: %v", condition(fe4))
}
