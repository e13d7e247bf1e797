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
// configChangeset and the id, as the tenant chart does.
func render(t *testing.T, ns, id string, ks ...string) {
	t.Helper()
	update(t, ns, func(n v2alpha1.Node) {
		n.NodeSpec().ConfigChangeset = id
		withAnnotation(v2alpha1.AnnotationRolloutID, id)(n)
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
// it keeps rollout-id r1 while the chart renders r2 to the other nodes. The
// change proceeds once the landing timeout has passed, as documented; fe4
// is recorded left behind, and the next render (r3) rolls at once, as if
// fe4 were not there, instead of waiting the landing timeout again.
func TestANodeTheChartNoLongerRendersHoldsOnlyTheFirstChangeWithoutIt(t *testing.T) {
	ctx := context.Background()
	ns := settledTenant(t, 5, 1)
	render(t, ns, "r1", keys(5)...)
	waitSettled(t, ns)
	rendered := keys(4)

	render(t, ns, "r2", rendered...)
	waitSettled(t, ns)
	require.Equal(t, 1, landingTimedOut(t, ns, "acme-fe1"), "r2 went on past the landing timeout: %v", releaseMessages(t, ns, "acme-fe1"))
	fe4 := node(ns, "fe4")
	require.NoError(t, harness.Client.Get(ctx, client.ObjectKeyFromObject(fe4), fe4))
	assert.Equal(t, "r1", fe4.GetAnnotations()[v2alpha1.AnnotationLeftBehind], "fe4 recorded left behind")
	require.True(t, waitFor(10*time.Second, func() bool {
		return harness.Client.Get(ctx, client.ObjectKeyFromObject(fe4), fe4) == nil && condition(fe4) != nil && strings.Contains(condition(fe4).Message, "left behind")
	}), "fe4's condition says it is left behind: %v", condition(fe4))

	render(t, ns, "r3", rendered...)
	waitSettled(t, ns)
	assert.Equal(t, 1, landingTimedOut(t, ns, "acme-fe1"), "r3 did not wait for fe4: %v", releaseMessages(t, ns, "acme-fe1"))
	assert.Len(t, releaseMessages(t, ns, "acme-fe1"), 4, "fe1 released for its first rollout, r1, r2 and r3")
}
