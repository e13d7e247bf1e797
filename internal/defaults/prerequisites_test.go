package defaults

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

func node(name string) v2alpha1.Node {
	n := v2alpha1.NewNode(v2alpha1.KindFrontend)
	if name == "acme-be" {
		n = v2alpha1.NewNode(v2alpha1.KindBackend)
	}
	n.SetName(name)
	n.NodeSpec().ClusterConfig.ClusterName = "acme"
	return n
}

func names(ps []v2alpha1.Prerequisite) []string {
	if ps == nil {
		return nil
	}
	out := []string{}
	for _, p := range ps {
		out = append(out, p.ExpressNode)
	}
	return out
}

func TestApplyInjectsTheChartsAllNodeConfig(t *testing.T) {
	want := map[string][2][]string{ // provisioning, upgrade
		"acme-be":  {{}, {"acme-fe2"}},
		"acme-fe1": {{"acme-be"}, {}},
		"acme-fe2": {{"acme-fe1"}, {"acme-fe1"}},
		"acme-fe3": {{"acme-fe2"}, {"acme-be"}},
		"acme-fe4": {{"acme-fe3"}, {"acme-fe3"}},
	}
	for name, lists := range want {
		n := node(name)
		require.True(t, Builtin().Apply(n), name)
		assert.Equal(t, lists[0], names(ProvisioningList.Get(n.NodeSpec())), "%s provisioning", name)
		assert.Equal(t, lists[1], names(UpgradeList.Get(n.NodeSpec())), "%s upgrade", name)
		for _, p := range append(ProvisioningList.Get(n.NodeSpec()), UpgradeList.Get(n.NodeSpec())...) {
			assert.Equal(t, "Ready", p.PodConditionType)
			assert.Equal(t, "True", p.ConditionStatus)
			assert.Empty(t, p.ExpressVersion, "defaults pin no version")
			assert.Empty(t, p.DeploymentRevision, "defaults pin no revision")
		}
		assert.True(t, IsDefaulted(n, ProvisioningList))
		assert.True(t, IsDefaulted(n, UpgradeList))
	}
	fe3 := node("acme-fe3")
	Builtin().Apply(fe3)
	assert.Equal(t, v2alpha1.KindBackend, UpgradeList.Get(fe3.NodeSpec())[0].Kind)
	assert.JSONEq(t, `{"provisioningPrerequisites":["acme-fe2"],"upgradePrerequisites":["acme-be"]}`,
		fe3.GetAnnotations()[v2alpha1.AnnotationDefaultedPrerequisites])
}

func TestApplyNeverTouchesTheUsersLists(t *testing.T) {
	explicit := []v2alpha1.Prerequisite{{ExpressNode: "acme-fe3", Kind: "Frontend", ExpressVersion: "express-e689.154", PodConditionType: "Ready", ConditionStatus: "True"}}
	cases := []struct {
		name         string
		prov, upg    []v2alpha1.Prerequisite
		wantProvUser bool
		wantUpgUser  bool
	}{
		{"explicit empty lists (disableDependencies) stay empty", []v2alpha1.Prerequisite{}, []v2alpha1.Prerequisite{}, true, true},
		{"an explicit provisioning list stays and only the absent upgrade list is defaulted", explicit, nil, true, false},
		{"an explicit upgrade list stays and only the absent provisioning list is defaulted", nil, explicit, false, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := node("acme-fe4")
			n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{ProvisioningPrerequisites: c.prov, UpgradePrerequisites: c.upg}
			Builtin().Apply(n)
			if c.wantProvUser {
				assert.Equal(t, c.prov, ProvisioningList.Get(n.NodeSpec()))
				assert.NotNil(t, ProvisioningList.Get(n.NodeSpec()), "empty stays present")
			} else {
				assert.Equal(t, []string{"acme-fe3"}, names(ProvisioningList.Get(n.NodeSpec())))
			}
			if c.wantUpgUser {
				assert.Equal(t, c.upg, UpgradeList.Get(n.NodeSpec()))
			} else {
				assert.Equal(t, []string{"acme-fe3"}, names(UpgradeList.Get(n.NodeSpec())))
			}
			assert.Equal(t, !c.wantProvUser, IsDefaulted(n, ProvisioningList))
			assert.Equal(t, !c.wantUpgUser, IsDefaulted(n, UpgradeList))
		})
	}
}

func TestApplyIsIdempotent(t *testing.T) {
	for _, name := range []string{"acme-be", "acme-fe1", "acme-fe2", "acme-fe7"} {
		once := node(name)
		Builtin().Apply(once)
		twice := once.DeepCopyObject().(v2alpha1.Node)
		Builtin().Apply(twice)
		assert.Equal(t, once, twice, name)
	}
}

func TestApplyRefreshesDefaultsWhenTheOrderChanges(t *testing.T) {
	n := node("acme-fe3")
	Builtin().Apply(n)
	require.Equal(t, []string{"acme-be"}, names(UpgradeList.Get(n.NodeSpec())))

	reordered := Orders{Provisioning: Order{Backend}, Upgrade: Order{Backend}}
	reordered.Apply(n)
	assert.Equal(t, []string{"acme-fe2"}, names(UpgradeList.Get(n.NodeSpec())), "fe3 now follows fe2 in the upgrade order")
	assert.True(t, IsDefaulted(n, UpgradeList))
}

func TestAListTheUserEditedAfterDefaultingBecomesTheirs(t *testing.T) {
	n := node("acme-fe3")
	Builtin().Apply(n)
	n.NodeSpec().DeploymentDependencies.UpgradePrerequisites[0].ExpressVersion = "express-e689.154"
	edited := n.NodeSpec().DeploymentDependencies.UpgradePrerequisites[0]

	assert.False(t, IsDefaulted(n, UpgradeList))
	Orders{Provisioning: Order{Backend}, Upgrade: Order{Backend}}.Apply(n)
	assert.Equal(t, []v2alpha1.Prerequisite{edited}, UpgradeList.Get(n.NodeSpec()), "the edited list is kept")
	assert.NotContains(t, n.GetAnnotations()[v2alpha1.AnnotationDefaultedPrerequisites], "upgradePrerequisites")
}

func TestApplySkipsNodesThatFitNoKey(t *testing.T) {
	for _, n := range []v2alpha1.Node{
		node("acme-web"),
		node("other-fe1"),
		&v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-be"}, Spec: v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "acme"}}},
	} {
		assert.False(t, Builtin().Apply(n), "%s %s", n.NodeKind(), n.GetName())
		assert.Nil(t, n.NodeSpec().DeploymentDependencies)
		assert.Empty(t, n.GetAnnotations())
	}
}

func TestACorruptRecordMakesEveryPresentListTheUsers(t *testing.T) {
	n := node("acme-fe2")
	Builtin().Apply(n)
	n.SetAnnotations(map[string]string{v2alpha1.AnnotationDefaultedPrerequisites: "{not json"})
	assert.False(t, IsDefaulted(n, ProvisioningList))
	before := n.NodeSpec().DeepCopy()
	Orders{Provisioning: Order{Backend, FrontendKey(2)}, Upgrade: Order{Backend}}.Apply(n)
	assert.Equal(t, before.DeploymentDependencies, n.NodeSpec().DeploymentDependencies)
	assert.NotContains(t, n.GetAnnotations(), v2alpha1.AnnotationDefaultedPrerequisites)
}

func TestAListEqualToTheDefaultIsTheUsersUnlessTheWebhookInjectedIt(t *testing.T) {
	reordered := Orders{Provisioning: Order{Backend, FrontendKey(2)}, Upgrade: Order{Backend}}
	users := []v2alpha1.Prerequisite{Prerequisite("acme", Backend)}
	t.Run("a manifest copied with the record is created with the user's list", func(t *testing.T) {
		copied := node("acme-fe1")
		copied.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{ProvisioningPrerequisites: users}
		copied.SetAnnotations(map[string]string{v2alpha1.AnnotationDefaultedPrerequisites: `{"provisioningPrerequisites":["acme-be"]}`})
		RestoreRecord(copied, nil)
		Builtin().Apply(copied)
		assert.False(t, IsDefaulted(copied, ProvisioningList))
		reordered.Apply(copied)
		assert.Equal(t, users, ProvisioningList.Get(copied.NodeSpec()), "a new order leaves it alone")
	})
	t.Run("a list the last applied manifest sets stays the user's though the webhook injected the same before", func(t *testing.T) {
		n := node("acme-fe1")
		Builtin().Apply(n)
		require.True(t, IsDefaulted(n, ProvisioningList))
		stored := n.DeepCopyObject().(v2alpha1.Node)
		n.GetAnnotations()[lastAppliedAnnotation] = `{"spec":{"deploymentDependencies":{"provisioningPrerequisites":[{"expressNode":"acme-be"}]}}}`
		RestoreRecord(n, stored)
		reordered.Apply(n)
		assert.Equal(t, users, ProvisioningList.Get(n.NodeSpec()), "the declared list is kept")
		assert.NotContains(t, n.GetAnnotations()[v2alpha1.AnnotationDefaultedPrerequisites], "provisioningPrerequisites")
	})
	t.Run("a list equal to the default that Helm or server-side apply writes stays the user's when the explicit-prerequisites annotation names it", func(t *testing.T) {
		for _, mark := range []string{"true", "provisioningPrerequisites", "upgradePrerequisites, provisioningPrerequisites"} {
			n := node("acme-fe1")
			Builtin().Apply(n)
			require.True(t, IsDefaulted(n, ProvisioningList))
			stored := n.DeepCopyObject().(v2alpha1.Node)
			n.GetAnnotations()[v2alpha1.AnnotationExplicitPrerequisites] = mark
			RestoreRecord(n, stored)
			assert.False(t, IsDefaulted(n, ProvisioningList), mark)
			reordered.Apply(n)
			assert.Equal(t, users, ProvisioningList.Get(n.NodeSpec()), "%s: the marked list is kept", mark)
		}
		n := node("acme-fe1")
		Builtin().Apply(n)
		n.GetAnnotations()[v2alpha1.AnnotationExplicitPrerequisites] = "upgradePrerequisites"
		reordered.Apply(n)
		assert.NotEqual(t, users, ProvisioningList.Get(n.NodeSpec()), "a list the annotation does not name is refreshed")
	})
	t.Run("a record a user writes on an update is the stored one again", func(t *testing.T) {
		n := node("acme-fe3")
		explicit := []v2alpha1.Prerequisite{Prerequisite("acme", FrontendKey(2))}
		n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{UpgradePrerequisites: explicit}
		Builtin().Apply(n)
		stored := n.DeepCopyObject().(v2alpha1.Node)
		n.GetAnnotations()[v2alpha1.AnnotationDefaultedPrerequisites] = `{"provisioningPrerequisites":["acme-fe2"],"upgradePrerequisites":["acme-fe2"]}`
		RestoreRecord(n, stored)
		reordered.Apply(n)
		assert.Equal(t, explicit, UpgradeList.Get(n.NodeSpec()))
		assert.False(t, IsDefaulted(n, UpgradeList))
	})
}
