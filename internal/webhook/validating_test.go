package webhook_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

func ready(node string, kind string) v2alpha1.Prerequisite {
	return v2alpha1.Prerequisite{ExpressNode: node, Kind: kind, PodConditionType: "Ready", ConditionStatus: "True"}
}

// inCache waits until the webhook's cache holds the node as stored, since
// the validating webhook reads siblings from it.
func inCache(t *testing.T, n v2alpha1.Node) {
	t.Helper()
	require.Eventually(t, func() bool {
		cached := v2alpha1.NewNode(n.NodeKind())
		err := env(t).Manager.GetClient().Get(context.Background(), client.ObjectKeyFromObject(n), cached)
		return err == nil && cached.GetResourceVersion() == n.GetResourceVersion()
	}, 10*time.Second, 20*time.Millisecond)
}

func withLists(n v2alpha1.Node, prov, upg []v2alpha1.Prerequisite) v2alpha1.Node {
	n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{ProvisioningPrerequisites: prov, UpgradePrerequisites: upg}
	return n
}

// tenantWithNeighbour creates acme-be, acme-fe1, acme-fe2 and, in the same
// namespace, zeta-fe1 of tenant zeta.
func tenantWithNeighbour(t *testing.T) string {
	t.Helper()
	ns := namespace(t)
	zeta := seedNode(ns, "fe1")
	zeta.SetName("zeta-fe1")
	zeta.NodeSpec().ClusterConfig.ClusterName = "zeta"
	for _, n := range []v2alpha1.Node{seedNode(ns, "be"), seedNode(ns, "fe1"), seedNode(ns, "fe2"), zeta} {
		require.NoError(t, env(t).Client.Create(context.Background(), n))
		inCache(t, n)
	}
	return ns
}

func TestSpecsThatCanNeverProgressAreDeniedNamingTheFieldAndNodes(t *testing.T) {
	ns := tenantWithNeighbour(t)
	cases := []struct {
		name      string
		prov, upg []v2alpha1.Prerequisite
		want      []string
	}{
		{"a node that waits for itself", []v2alpha1.Prerequisite{ready("acme-fe3", "Frontend")}, nil,
			[]string{"spec.deploymentDependencies.provisioningPrerequisites[0].expressNode", "acme-fe3 cannot be its own prerequisite"}},
		{"a prerequisite of another tenant that exists", nil, []v2alpha1.Prerequisite{ready("zeta-fe1", "Frontend")},
			[]string{"spec.deploymentDependencies.upgradePrerequisites[0].expressNode", "zeta-fe1 belongs to tenant zeta, not acme"}},
		{"a prerequisite named after another tenant", []v2alpha1.Prerequisite{ready("acme-fe1", "Frontend"), ready("other-fe9", "Frontend")}, nil,
			[]string{"spec.deploymentDependencies.provisioningPrerequisites[1].expressNode", "other-fe9 is not a node of tenant acme"}},
		{"a kind that does not match the stored node", []v2alpha1.Prerequisite{ready("acme-be", "Frontend")}, nil,
			[]string{"spec.deploymentDependencies.provisioningPrerequisites[0].kind", "acme-be is a Backend, not a Frontend"}},
		{"a kind that does not match the node key", nil, []v2alpha1.Prerequisite{ready("acme-fe7", "Backend")},
			[]string{"spec.deploymentDependencies.upgradePrerequisites[0].kind", "acme-fe7 is named as a Frontend, not a Backend"}},
		{"the same prerequisite twice", []v2alpha1.Prerequisite{ready("acme-fe1", "Frontend"), ready("acme-fe1", "Frontend")}, nil,
			[]string{"spec.deploymentDependencies.provisioningPrerequisites[1].expressNode", "acme-fe1 is already listed at index 0"}},
		{"an unknown pod condition type", []v2alpha1.Prerequisite{{ExpressNode: "acme-be", Kind: "Backend", PodConditionType: "Healthy", ConditionStatus: "True"}}, nil,
			[]string{"spec.deploymentDependencies.provisioningPrerequisites[0].podConditionType", `Unsupported value: "Healthy"`, `"Ready"`}},
		{"an unknown condition status", nil, []v2alpha1.Prerequisite{{ExpressNode: "acme-be", Kind: "Backend", PodConditionType: "Ready", ConditionStatus: "Yes"}},
			[]string{"spec.deploymentDependencies.upgradePrerequisites[0].conditionStatus", `Unsupported value: "Yes"`, `"True"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := withLists(seedNode(ns, "fe3"), c.prov, c.upg)
			err := env(t).Client.Create(context.Background(), n)
			require.Error(t, err)
			assert.True(t, apierrors.IsInvalid(err), "denied as invalid: %v", err)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
			assert.Contains(t, err.Error(), `Frontend.express.medallia.com "acme-fe3" is invalid`)
		})
	}
}

func TestACycleOfExplicitPrerequisitesIsDeniedAndSpelledOut(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := tenantWithNeighbour(t)
	fe1 := get(t, seedNode(ns, "fe1"))
	fe1.NodeSpec().DeploymentDependencies.UpgradePrerequisites = []v2alpha1.Prerequisite{ready("acme-fe2", "Frontend")}
	require.NoError(t, c.Update(ctx, fe1))
	inCache(t, fe1)
	fe2 := get(t, seedNode(ns, "fe2"))
	fe2.NodeSpec().DeploymentDependencies.UpgradePrerequisites = []v2alpha1.Prerequisite{ready("acme-fe3", "Frontend")}
	require.NoError(t, c.Update(ctx, fe2))
	inCache(t, fe2)

	cyclic := withLists(seedNode(ns, "fe3"), nil, []v2alpha1.Prerequisite{ready("acme-fe1", "Frontend")})
	want := "spec.deploymentDependencies.upgradePrerequisites[0].expressNode: Invalid value: \"acme-fe1\": acme-fe3 → acme-fe1 → acme-fe2 → acme-fe3 is a cycle"

	err := c.Create(ctx, cyclic.DeepCopyObject().(client.Object), client.DryRunAll)
	require.Error(t, err, "a dry-run is denied like the real request")
	assert.Contains(t, err.Error(), want)

	err = c.Create(ctx, cyclic)
	require.Error(t, err)
	assert.Contains(t, err.Error(), want)

	t.Run("the same nodes in a provisioning list are no cycle of the upgrade list", func(t *testing.T) {
		ok := withLists(seedNode(ns, "fe3"), []v2alpha1.Prerequisite{ready("acme-fe1", "Frontend")}, nil)
		require.NoError(t, c.Create(ctx, ok))
	})
}

func TestPrerequisitesThatMayStillComeRightAreWarnedAbout(t *testing.T) {
	ctx := context.Background()
	wc, w := warningClient(t)
	ns := tenantWithNeighbour(t)

	missing := withLists(seedNode(ns, "fe3"), []v2alpha1.Prerequisite{ready("acme-fe9", "Frontend")}, nil)
	require.NoError(t, wc.Create(ctx, missing))
	assert.Contains(t, w.all(), "spec.deploymentDependencies.provisioningPrerequisites[0].expressNode: Frontend acme-fe9 does not exist yet; acme-fe3 waits for it until it does")

	odd := seedNode(ns, "fe1")
	odd.SetName("acme-web")
	require.NoError(t, wc.Create(ctx, odd))
	assert.Contains(t, w.all(), "Frontend acme-web does not fit the node names of tenant acme (acme-be for the Backend, acme-fe<n> for Frontends): it gets no default prerequisites and has no place in the default order")
	assert.Nil(t, get(t, odd).NodeSpec().DeploymentDependencies, "no defaults for a name that fits no key")
}

func TestDefaultsThatNameAbsentNodesAreNotWarnedAbout(t *testing.T) {
	wc, w := warningClient(t)
	be := seedNode(namespace(t), "be") // its default upgrade prerequisite acme-fe2 does not exist
	require.NoError(t, wc.Create(context.Background(), be))
	assert.Equal(t, []string{"acme-fe2"}, prereqNames(get(t, be).NodeSpec().DeploymentDependencies.UpgradePrerequisites))
	assert.Empty(t, w.all())
}

// A cycle closed through a defaulted list may be transient (the chart may be
// changing the other list in the same apply): a warning that spells it out.
func TestACycleThroughTheDefaultOrderIsWarnedAboutAndSpelledOut(t *testing.T) {
	ctx := context.Background()
	wc, w := warningClient(t)
	ns := namespace(t)
	for _, n := range seedTenant(ns) {
		require.NoError(t, wc.Create(ctx, n))
		inCache(t, n)
	}

	t.Run("the backend waiting for fe3, which the default order puts after it", func(t *testing.T) {
		be := get(t, seedNode(ns, "be"))
		be.NodeSpec().DeploymentDependencies.UpgradePrerequisites = []v2alpha1.Prerequisite{ready("acme-fe3", "Frontend")}
		require.NoError(t, wc.Update(ctx, be))
		assert.Contains(t, w.all(), "spec.deploymentDependencies.upgradePrerequisites: acme-be → acme-fe3 → acme-be is a cycle "+
			"(acme-fe3 → acme-be by the default order): the tenant stops there (DependencyCycle) at its next change unless another list changes")
		be.NodeSpec().DeploymentDependencies.UpgradePrerequisites = nil // back to the defaults
		require.NoError(t, wc.Update(ctx, be))
		inCache(t, be)
	})
	t.Run("fe1 waiting for fe2, then fe2 for fe1 with a list equal to its default", func(t *testing.T) {
		fe1 := get(t, seedNode(ns, "fe1"))
		fe1.NodeSpec().DeploymentDependencies.UpgradePrerequisites = []v2alpha1.Prerequisite{ready("acme-fe2", "Frontend")}
		require.NoError(t, wc.Update(ctx, fe1))
		inCache(t, fe1)
		assert.Contains(t, w.all(), "spec.deploymentDependencies.upgradePrerequisites: acme-fe1 → acme-fe2 → acme-fe1 is a cycle "+
			"(acme-fe2 → acme-fe1 by the default order): the tenant stops there (DependencyCycle) at its next change unless another list changes")

		fe2 := get(t, seedNode(ns, "fe2"))
		fe2.NodeSpec().DeploymentDependencies.UpgradePrerequisites = []v2alpha1.Prerequisite{ready("acme-fe1", "Frontend")}
		before := len(w.all())
		require.NoError(t, wc.Update(ctx, fe2))
		assert.True(t, containsSubstring(w.all()[before:], "acme-fe2 → acme-fe1 → acme-fe2 is a cycle"), w.all())
	})
}

// Two explicit lists of nodes carrying the same rollout-id form a cycle that
// no landing change can undo: denied.
func TestACycleOfSettledExplicitListsIsDeniedEvenWhenOneEqualsItsDefault(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	fe1 := withLists(seedNode(ns, "fe1"), nil, []v2alpha1.Prerequisite{ready("acme-fe3", "Frontend")})
	require.NoError(t, c.Create(ctx, fe1))
	inCache(t, fe1)
	fe3 := withLists(seedNode(ns, "fe3"), nil, []v2alpha1.Prerequisite{ready("acme-fe1", "Frontend")})
	err := c.Create(ctx, fe3)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `spec.deploymentDependencies.upgradePrerequisites[0].expressNode: Invalid value: "acme-fe1": acme-fe3 → acme-fe1 → acme-fe3 is a cycle`)
}
