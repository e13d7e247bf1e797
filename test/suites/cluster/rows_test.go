package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// The rows of DESIGN §4 the other files do not cover, on Kubernetes' own
// control loops. A crashed node's pods crash in place (KWOK's
// pod-crash-loop stage); they are replaced by its next rollout (the
// operator deletes a failing pod left on an old template), or deleted by
// Mend, as an on-call engineer does once the cause is gone.

func TestAConfigOnlyChangeToAllRollsInTheUpgradeOrder(t *testing.T) {
	ns := settledTenant(t, 5, 1)
	mark := time.Now()
	update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().ConfigChangeset = "changeset-2" }, keys(5)...)
	waitSettled(t, ns)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "fe1", "fe2", "be", "fe3", "fe4")
}

func TestAChangeToAFieldOnlyTheExpressCRDKnowsRollsInTheUpgradeOrder(t *testing.T) {
	ns := settledTenant(t, 4, 1)
	mark := time.Now()
	patch := `{"spec":{"extensions":{"jvm":{"flags":["-Xmx4g"]}}}}`
	for _, k := range keys(4) {
		require.NoError(t, harness.Client.Patch(context.Background(), node(ns, k), client.RawPatch(types.MergePatchType, []byte(patch))))
	}
	waitSettled(t, ns)
	assert.Equal(t, "fe1 fe2 be fe3", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "fe1", "fe2", "be", "fe3")
}

func TestAChangeToAllWhileFe3IsCrashedRollsFe3InItsTurn(t *testing.T) {
	ctx := context.Background()
	ns := settledTenant(t, 5, 1)
	require.NoError(t, cluster.Crash(ctx, ns, "acme-fe3"))
	mark := time.Now()
	setVersion(t, ns, v2, keys(5)...)
	waitSettled(t, ns)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "fe1", "fe2", "be", "fe3", "fe4")
}

func TestAChangeToAllThatBringsFe3BackUpRollsFe3InItsTurn(t *testing.T) {
	ns := settledTenant(t, 5, 1)
	update(t, ns, func(n v2alpha1.Node) { down := false; n.NodeSpec().Up = &down }, "fe3")
	waitSettled(t, ns)
	mark := time.Now()
	update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().ExpressVersion = v2; up := true; n.NodeSpec().Up = &up }, keys(5)...)
	waitSettled(t, ns)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "fe1", "fe2", "be", "fe3", "fe4")
}

func TestAChangeToAllWhileTheBackendIsCrashedRollsTheBackendFirst(t *testing.T) {
	ctx := context.Background()
	ns := settledTenant(t, 5, 1)
	require.NoError(t, cluster.Crash(ctx, ns, "acme-be"))
	mark := time.Now()
	setVersion(t, ns, v2, keys(5)...)
	waitSettled(t, ns)
	assert.Equal(t, "be fe1 fe2 fe3 fe4", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "be", "fe1", "fe2", "fe3", "fe4")
}

// be crashes while fe2 rolls (its old pod Terminating for 2 s): be goes on
// the new target only after fe2 is Ready on it.
func TestABackendCrashingWhileFe2RollsGoesOnlyAfterFe2IsReadyOnTheNewTarget(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	grace.set(ns, 2*time.Second)
	createNodes(t, ns, 5)
	waitSettled(t, ns)
	mark := time.Now()
	setVersion(t, ns, v2, keys(5)...)
	fe2 := node(ns, "fe2")
	require.True(t, waitFor(time.Minute, func() bool {
		return harness.Client.Get(ctx, client.ObjectKeyFromObject(fe2), fe2) == nil && !v2alpha1.IsGated(fe2)
	}), "fe2 is released")
	require.NoError(t, cluster.Crash(ctx, ns, "acme-be"))
	waitSettled(t, ns)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "fe1", "fe2", "be", "fe3", "fe4")
}

func TestAllNodesCrashedComeBackBackendFirst(t *testing.T) {
	ctx := context.Background()
	ns := settledTenant(t, 5, 1)
	require.NoError(t, cluster.Crash(ctx, ns, "acme-fe4", "acme-fe3", "acme-fe2", "acme-fe1", "acme-be"))
	mark := time.Now()
	require.NoError(t, cluster.Mend(ctx, ns))
	waitSettled(t, ns)
	assert.Equal(t, "be fe1 fe2 fe3 fe4", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "be", "fe1", "fe2", "fe3", "fe4")
}

// be crashed and a change to the frontends pending: nothing rolls while be
// is crashed (every frontend is provisioned after it); mended, be comes
// back first, then the frontends in their order.
func TestABackendCrashedWithAFrontendChangePendingComesBackFirst(t *testing.T) {
	ctx := context.Background()
	ns := settledTenant(t, 5, 1)
	require.NoError(t, cluster.Crash(ctx, ns, "acme-be"))
	mark := time.Now()
	setVersion(t, ns, v2, "fe1", "fe2", "fe3", "fe4")
	time.Sleep(2 * time.Second)
	assert.Empty(t, starts(ns, mark), "no frontend rolls while the backend is crashed")
	require.NoError(t, cluster.Mend(ctx, ns))
	waitSettled(t, ns)
	assert.Equal(t, "be fe1 fe2 fe3 fe4", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "be", "fe1", "fe2", "fe3", "fe4")
}

func TestCrashedFe2AndFe4ComeBackFe2First(t *testing.T) {
	ctx := context.Background()
	ns := settledTenant(t, 5, 1)
	require.NoError(t, cluster.Crash(ctx, ns, "acme-fe4", "acme-fe2"))
	mark := time.Now()
	require.NoError(t, cluster.Mend(ctx, ns))
	waitSettled(t, ns)
	assert.Equal(t, "fe2 fe4", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "fe2", "fe4")
}

// The tenant chart's change applied node by node, backend first, 3 s apart
// (ten times the settle time): rollout-id holds the tenant until every
// node carries the new one, then it rolls as if applied at once.
func TestAChangeAppliedNodeByNodeWithGapsRollsAsIfAppliedAtOnce(t *testing.T) {
	ns := settledTenant(t, 5, 1)
	update(t, ns, func(n v2alpha1.Node) { n.GetAnnotations()[v2alpha1.AnnotationRolloutID] = "r1" }, keys(5)...)
	waitSettled(t, ns)
	mark := time.Now()
	for i, k := range keys(5) {
		if i > 0 {
			time.Sleep(3 * time.Second)
			assert.Empty(t, starts(ns, mark), "nothing rolls while the change is landing")
		}
		update(t, ns, func(n v2alpha1.Node) {
			n.NodeSpec().ExpressVersion = v2
			n.GetAnnotations()[v2alpha1.AnnotationRolloutID] = "r2"
		}, k)
	}
	waitSettled(t, ns)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "fe1", "fe2", "be", "fe3", "fe4")
}

// Explicit empty lists (the chart's disableDependencies): every node is
// released for the change at once, waiting for no one.
func TestExplicitEmptyListsReleaseEveryNodeAtOnce(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	for _, k := range keys(4) {
		nd := node(ns, k)
		*nd.NodeSpec() = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "acme", TenantID: "1", TenantName: "acme"}, ExpressVersion: v1,
			DeploymentDependencies: &v2alpha1.DeploymentDependencies{ProvisioningPrerequisites: []v2alpha1.Prerequisite{}, UpgradePrerequisites: []v2alpha1.Prerequisite{}}}
		require.NoError(t, harness.Client.Create(ctx, nd))
	}
	waitSettled(t, ns)
	setVersion(t, ns, v2, keys(4)...)
	waitSettled(t, ns)
	for _, k := range keys(4) {
		var events []string
		require.True(t, waitFor(30*time.Second, func() bool {
			events = releaseMessages(t, ns, "acme-"+k)
			return len(events) >= 2
		}), "%s released twice (provisioning, upgrade): %v", k, events)
		for _, m := range events {
			assert.Contains(t, m, "no live prerequisites", "%s waited for no one", k)
		}
	}
}
