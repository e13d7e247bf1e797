package webhook_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

func prereqNames(ps []v2alpha1.Prerequisite) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.ExpressNode)
	}
	return out
}

func TestTheSeedTenantComesBackWithTheChartsAllNodeConfigAndGated(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	for _, n := range seedTenant(ns) {
		require.NoError(t, c.Create(ctx, n))
	}
	want := map[string][2][]string{ // provisioning, upgrade: allNodeConfig of the chart
		"acme-be":  {{}, {"acme-fe2"}},
		"acme-fe1": {{"acme-be"}, {}},
		"acme-fe2": {{"acme-fe1"}, {"acme-fe1"}},
		"acme-fe3": {{"acme-fe2"}, {"acme-be"}},
		"acme-fe4": {{"acme-fe3"}, {"acme-fe3"}},
	}
	for _, n := range seedTenant(ns) {
		stored := get(t, n)
		deps := stored.NodeSpec().DeploymentDependencies
		require.NotNil(t, deps, stored.GetName())
		require.NotNil(t, deps.ProvisioningPrerequisites, "%s: an empty default list is stored as [], not left out", stored.GetName())
		require.NotNil(t, deps.UpgradePrerequisites, "%s: an empty default list is stored as [], not left out", stored.GetName())
		assert.Equal(t, want[stored.GetName()][0], prereqNames(deps.ProvisioningPrerequisites), "%s provisioning", stored.GetName())
		assert.Equal(t, want[stored.GetName()][1], prereqNames(deps.UpgradePrerequisites), "%s upgrade", stored.GetName())
		assert.Equal(t, []v2alpha1.RolloutGate{{Name: v2alpha1.GateSequencer}}, stored.NodeSpec().RolloutGates, stored.GetName())
		assert.True(t, defaults.IsDefaulted(stored, defaults.ProvisioningList))
		assert.True(t, defaults.IsDefaulted(stored, defaults.UpgradeList))
		assert.True(t, stored.NodeSpec().IsUp(), "up defaults to true")
	}
	fe3 := get(t, seedNode(ns, "fe3"))
	assert.Equal(t, v2alpha1.Prerequisite{ExpressNode: "acme-be", Kind: "Backend", PodConditionType: "Ready", ConditionStatus: "True"},
		fe3.NodeSpec().DeploymentDependencies.UpgradePrerequisites[0])
}

func TestExplicitPrerequisitesComeBackUnchangedApartFromTheGate(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)

	explicit := seedNode(ns, "fe3")
	explicit.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{
		ProvisioningPrerequisites: []v2alpha1.Prerequisite{{ExpressNode: "acme-be", Kind: "Backend", ExpressVersion: "express-e689.154", PodConditionType: "Ready", ConditionStatus: "True"}},
		UpgradePrerequisites:      []v2alpha1.Prerequisite{{ExpressNode: "acme-fe1", Kind: "Frontend", DeploymentRevision: "42", PodConditionType: "ContainersReady", ConditionStatus: "True"}},
	}
	disabled := seedNode(ns, "fe4") // disableDependencies: true renders explicit empty lists
	disabled.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{
		ProvisioningPrerequisites: []v2alpha1.Prerequisite{}, UpgradePrerequisites: []v2alpha1.Prerequisite{},
	}
	for _, n := range []v2alpha1.Node{explicit, disabled} {
		sent := n.NodeSpec().DeepCopy()
		require.NoError(t, c.Create(ctx, n))
		stored := get(t, n)
		assert.Equal(t, sent.DeploymentDependencies, stored.NodeSpec().DeploymentDependencies, n.GetName())
		assert.NotNil(t, stored.NodeSpec().DeploymentDependencies.ProvisioningPrerequisites, "%s: [] survives the round trip", n.GetName())
		assert.True(t, stored.NodeSpec().HasGate(v2alpha1.GateSequencer), n.GetName())
		assert.NotContains(t, stored.GetAnnotations(), v2alpha1.AnnotationDefaultedPrerequisites, n.GetName())
		sent.RolloutGates = stored.NodeSpec().RolloutGates
		sent.Up = stored.NodeSpec().Up
		assert.Equal(t, *sent, *stored.NodeSpec(), "%s: nothing else changed", n.GetName())
	}
}

func TestDryRunCreateShowsTheDefaultsAndGateAndPersistsNothing(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	n := seedNode(ns, "fe2")
	require.NoError(t, c.Create(ctx, n, client.DryRunAll))
	assert.Equal(t, []string{"acme-fe1"}, prereqNames(n.NodeSpec().DeploymentDependencies.UpgradePrerequisites))
	assert.True(t, n.NodeSpec().HasGate(v2alpha1.GateSequencer))
	err := c.Get(ctx, client.ObjectKeyFromObject(n), v2alpha1.NewNode(n.NodeKind()))
	assert.True(t, apierrors.IsNotFound(err), "dry-run stored nothing: %v", err)
}

func TestDryRunUpdateShowsTheGateAndPersistsNothing(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	n := seedNode(ns, "be")
	require.NoError(t, c.Create(ctx, n))
	release(t, c, n)
	before := get(t, n)

	n.NodeSpec().ExpressVersion = "express-e689.154"
	require.NoError(t, c.Update(ctx, n, client.DryRunAll))
	assert.True(t, n.NodeSpec().HasGate(v2alpha1.GateSequencer), "the dry-run answer shows the gate")

	after := get(t, n)
	assert.Equal(t, before.GetResourceVersion(), after.GetResourceVersion(), "dry-run stored nothing")
	assert.Equal(t, "express-e689.151", after.NodeSpec().ExpressVersion)
	assert.False(t, after.NodeSpec().HasGate(v2alpha1.GateSequencer))
}

func TestARolloutTargetChangeGatesTheNodeAndNothingElseDoes(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	n := seedNode(ns, "fe1")
	require.NoError(t, c.Create(ctx, n))
	release(t, c, n)

	t.Run("re-applying the same object is a no-op", func(t *testing.T) {
		rv := n.GetResourceVersion()
		require.NoError(t, c.Update(ctx, n))
		assert.Equal(t, rv, n.GetResourceVersion(), "no change, no write")
		assert.False(t, n.NodeSpec().HasGate(v2alpha1.GateSequencer))
	})
	created := n.GetAnnotations()[v2alpha1.AnnotationTargetChangedAt]
	t.Run("a label change does not gate", func(t *testing.T) {
		n.SetLabels(map[string]string{"team": "express"})
		require.NoError(t, c.Update(ctx, n))
		assert.False(t, get(t, n).NodeSpec().HasGate(v2alpha1.GateSequencer))
		assert.Equal(t, created, get(t, n).GetAnnotations()[v2alpha1.AnnotationTargetChangedAt], "no new target, no new stamp")
	})
	t.Run("a new expressVersion gates and is stamped", func(t *testing.T) {
		n.NodeSpec().ExpressVersion = "express-e689.154"
		require.NoError(t, c.Update(ctx, n))
		stored := get(t, n)
		assert.True(t, stored.NodeSpec().HasGate(v2alpha1.GateSequencer))
		stamp, err := time.Parse(time.RFC3339Nano, stored.GetAnnotations()[v2alpha1.AnnotationTargetChangedAt])
		require.NoError(t, err)
		first, err := time.Parse(time.RFC3339Nano, created)
		require.NoError(t, err)
		assert.True(t, stamp.After(first), "the stamp moves with the target")
		assert.Equal(t, created, stored.GetAnnotations()[v2alpha1.AnnotationTargetChangesBeganAt],
			"a change less than the settle time after the node's creation continues the run of changes that began with it")
		release(t, c, n)
	})
	t.Run("a new configChangeset gates", func(t *testing.T) {
		n.NodeSpec().ConfigChangeset = "0123456789abcdef"
		require.NoError(t, c.Update(ctx, n))
		assert.True(t, get(t, n).NodeSpec().HasGate(v2alpha1.GateSequencer))
		release(t, c, n)
	})
	t.Run("taking the node down does not gate it", func(t *testing.T) {
		n.NodeSpec().Up = ptr.To(false)
		require.NoError(t, c.Update(ctx, n))
		assert.False(t, get(t, n).NodeSpec().HasGate(v2alpha1.GateSequencer))
	})
	t.Run("bringing it back up gates it", func(t *testing.T) {
		n.NodeSpec().Up = ptr.To(true)
		require.NoError(t, c.Update(ctx, n))
		assert.True(t, get(t, n).NodeSpec().HasGate(v2alpha1.GateSequencer))
	})
}

func TestADownNodeIsCreatedWithoutAGate(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	n := seedNode(namespace(t), "fe2")
	n.NodeSpec().Up = ptr.To(false)
	require.NoError(t, c.Create(ctx, n))
	stored := get(t, n)
	assert.False(t, stored.NodeSpec().HasGate(v2alpha1.GateSequencer))
	assert.Equal(t, []string{"acme-fe1"}, prereqNames(stored.NodeSpec().DeploymentDependencies.ProvisioningPrerequisites), "a down node still gets its defaults")
}

// Taking a node down, or setting a prerequisite list of the user's,
// changes its order, not its target: nothing is gated, but the change is
// dated for the settle time (order-changed-at), and its target's date kept.
func TestAnOrderChangeIsDatedAndGatesNothing(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	n := seedNode(namespace(t), "fe2")
	require.NoError(t, c.Create(ctx, n))
	release(t, c, get(t, n))
	released := get(t, n)
	targetAt := released.GetAnnotations()[v2alpha1.AnnotationTargetChangedAt]
	require.NotEmpty(t, targetAt)
	require.Empty(t, released.GetAnnotations()[v2alpha1.AnnotationOrderChangedAt], "no order change yet")

	released.NodeSpec().Up = ptr.To(false)
	require.NoError(t, c.Update(ctx, released))
	down := get(t, n)
	assert.False(t, down.NodeSpec().HasGate(v2alpha1.GateSequencer), "taken down: not gated")
	assert.Equal(t, targetAt, down.GetAnnotations()[v2alpha1.AnnotationTargetChangedAt], "the target did not change")
	takenDownAt := down.GetAnnotations()[v2alpha1.AnnotationOrderChangedAt]
	require.NotEmpty(t, takenDownAt, "taking it down is dated")

	down.GetAnnotations()["example.com/note"] = "unrelated"
	require.NoError(t, c.Update(ctx, down))
	assert.Equal(t, takenDownAt, get(t, n).GetAnnotations()[v2alpha1.AnnotationOrderChangedAt], "an update that changes no order keeps the date")

	edited := get(t, n)
	edited.NodeSpec().DeploymentDependencies.ProvisioningPrerequisites = []v2alpha1.Prerequisite{defaults.Prerequisite("acme", defaults.Backend)}
	edited.GetAnnotations()[v2alpha1.AnnotationOrderChangedAt] = "2020-01-01T00:00:00Z"
	require.NoError(t, c.Update(ctx, edited))
	listed := get(t, n)
	assert.False(t, listed.NodeSpec().HasGate(v2alpha1.GateSequencer), "a list of the user's: not gated")
	assert.NotEqual(t, "2020-01-01T00:00:00Z", listed.GetAnnotations()[v2alpha1.AnnotationOrderChangedAt], "the date is the webhook's, not the writer's")
	assert.NotEqual(t, takenDownAt, listed.GetAnnotations()[v2alpha1.AnnotationOrderChangedAt], "a list of the user's is dated anew")
	assert.False(t, defaults.IsDefaulted(listed, defaults.ProvisioningList), "the list is the user's")
}

func TestOnlyTheSequencerRemovesItsGate(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	n := seedNode(namespace(t), "fe1")
	require.NoError(t, c.Create(ctx, n))

	// A replace that does not know the gate (kubectl replace, helm --force).
	replaced := seedNode(n.GetNamespace(), "fe1")
	replaced.SetResourceVersion(n.GetResourceVersion())
	require.NoError(t, c.Update(ctx, replaced, client.FieldOwner("helm")))
	stored := get(t, n)
	assert.True(t, stored.NodeSpec().HasGate(v2alpha1.GateSequencer), "the gate survives a replace by someone else")
	assert.True(t, defaults.IsDefaulted(stored, defaults.UpgradeList), "the defaults are injected again")

	release(t, c, stored)
	assert.False(t, get(t, n).NodeSpec().HasGate(v2alpha1.GateSequencer), "the sequencer's field manager removes it")
}

// A released node written back as kubectl get -o yaml printed it before its
// release — gate and all — is not gated again for the target it was
// released for (DESIGN §5: the webhook gates on a target change or up:
// false → true only).
func TestWritingBackAnOldCopyWithTheGateDoesNotGateAReleasedNodeAgain(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	n := seedNode(namespace(t), "fe1")
	require.NoError(t, c.Create(ctx, n))
	copyWithGate := get(t, n)
	require.True(t, copyWithGate.NodeSpec().HasGate(v2alpha1.GateSequencer))
	release(t, c, get(t, n))
	released := get(t, n)
	require.False(t, released.NodeSpec().HasGate(v2alpha1.GateSequencer))

	copyWithGate.SetResourceVersion(released.GetResourceVersion())
	require.NoError(t, c.Update(ctx, copyWithGate, client.FieldOwner("kubectl-client-side-apply")))
	assert.False(t, get(t, n).NodeSpec().HasGate(v2alpha1.GateSequencer), "the gate the copy carried is dropped")
}

// A manifest copied with the webhook's record of injected lists (kubectl
// get -o yaml of another tenant's node) is created with the user's lists:
// the record is the webhook's, read from the stored node only.
func TestARecordOfInjectedListsCopiedIntoANewNodeIsNotTrusted(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	n := seedNode(namespace(t), "fe1")
	n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{
		ProvisioningPrerequisites: []v2alpha1.Prerequisite{defaults.Prerequisite("acme", defaults.Backend)},
	}
	n.SetAnnotations(map[string]string{v2alpha1.AnnotationDefaultedPrerequisites: `{"provisioningPrerequisites":["acme-be"]}`})
	require.NoError(t, c.Create(ctx, n))
	stored := get(t, n)
	assert.False(t, defaults.IsDefaulted(stored, defaults.ProvisioningList), "the user's list, though equal to the default")
	assert.True(t, defaults.IsDefaulted(stored, defaults.UpgradeList), "the absent list is injected")
	assert.JSONEq(t, `{"upgradePrerequisites":[]}`, stored.GetAnnotations()[v2alpha1.AnnotationDefaultedPrerequisites])
}
