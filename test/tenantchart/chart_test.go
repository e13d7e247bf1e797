package tenantchart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/cmd/express-sequencer/app"
	"github.com/medallia/express-sequencer/defaults"
	"github.com/medallia/express-sequencer/test/controlplane"
)

var harness *controlplane.Harness

func TestMain(m *testing.M) {
	var err error
	// The webhooks only: what is stored is what admission made of the chart.
	if harness, err = controlplane.NewHarness(logr.Discard(), func(o *app.Options) { o.Sequencer = false }); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = harness.Stop()
	os.Exit(code)
}

// applyChart renders the chart into a new namespace, creates what it renders,
// and returns the stored nodes by key.
func applyChart(t *testing.T, valuesFile string) map[string]v2alpha1.Node {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "chart-"}}
	require.NoError(t, harness.Client.Create(ctx, ns))
	var files []string
	if valuesFile != "" {
		files = append(files, filepath.Join(Dir(), "ci", valuesFile))
	}
	_, nodes, err := Render(map[string]any{"namespace": ns.Name}, files...)
	require.NoError(t, err)
	stored := map[string]v2alpha1.Node{}
	for _, n := range nodes {
		require.NoError(t, harness.Client.Create(ctx, n))
		got := v2alpha1.NewNode(n.NodeKind())
		require.NoError(t, harness.Client.Get(ctx, client.ObjectKeyFromObject(n), got))
		stored[strings.TrimPrefix(n.GetName(), "acme-")] = got
	}
	return stored
}

func names(ps []v2alpha1.Prerequisite) []string {
	out := []string{}
	for _, p := range ps {
		out = append(out, p.ExpressNode)
	}
	return out
}

// chartEdges is the allNodeConfig the chart used to ship: now injected.
var chartEdges = map[string][2][]string{
	"be":  {{}, {"acme-fe2"}},
	"fe1": {{"acme-be"}, {}},
	"fe2": {{"acme-fe1"}, {"acme-fe1"}},
	"fe3": {{"acme-fe2"}, {"acme-be"}},
	"fe4": {{"acme-fe3"}, {"acme-fe3"}},
}

func TestTheChartHasNoOrderingTable(t *testing.T) {
	for _, f := range []string{"values.yaml", filepath.Join("templates", "nodes.yaml")} {
		data, err := os.ReadFile(filepath.Join(Dir(), f))
		require.NoError(t, err)
		for _, word := range []string{"allNodeConfig", "provisioningDependency", "upgradeDependency"} {
			assert.NotContains(t, string(data), word, f)
		}
	}
	manifests, _, err := Render(nil)
	require.NoError(t, err)
	assert.NotContains(t, manifests, "deploymentDependencies", "the default values render no prerequisites at all")
}

func TestTheDefaultValuesGetTheOperatorsOrderInjected(t *testing.T) {
	stored := applyChart(t, "")
	require.Len(t, stored, 5)
	for key, edges := range chartEdges {
		n := stored[key]
		assert.Equal(t, edges[0], names(n.NodeSpec().DeploymentDependencies.ProvisioningPrerequisites), "%s provisioning", key)
		assert.Equal(t, edges[1], names(n.NodeSpec().DeploymentDependencies.UpgradePrerequisites), "%s upgrade", key)
		assert.True(t, defaults.IsDefaulted(n, defaults.ProvisioningList), key)
		assert.True(t, defaults.IsDefaulted(n, defaults.UpgradeList), key)
		assert.True(t, v2alpha1.IsGated(n), key)
		assert.Equal(t, "express-e689.151", n.NodeSpec().ExpressVersion, key)
	}
}

func TestAPerNodeVersionOverridesOnlyThatNode(t *testing.T) {
	stored := applyChart(t, "version-override-values.yaml")
	assert.Equal(t, "express-e689.154", stored["fe1"].NodeSpec().ExpressVersion)
	for _, key := range []string{"be", "fe2", "fe3", "fe4"} {
		assert.Equal(t, "express-e689.151", stored[key].NodeSpec().ExpressVersion, key)
	}
	assert.True(t, defaults.IsDefaulted(stored["fe1"], defaults.UpgradeList), "the defaults are injected all the same")
}

func TestDisableDependenciesStoresEmptyListsUntouched(t *testing.T) {
	for key, n := range applyChart(t, "disable-dependencies-values.yaml") {
		deps := n.NodeSpec().DeploymentDependencies
		require.NotNil(t, deps, key)
		assert.NotNil(t, deps.ProvisioningPrerequisites, "%s: [] is kept, not dropped", key)
		assert.Empty(t, deps.ProvisioningPrerequisites, key)
		assert.NotNil(t, deps.UpgradePrerequisites, key)
		assert.Empty(t, deps.UpgradePrerequisites, key)
		assert.NotContains(t, n.GetAnnotations(), v2alpha1.AnnotationDefaultedPrerequisites, key)
	}
}

func TestANodeDownAndAnExplicitPrerequisite(t *testing.T) {
	stored := applyChart(t, "node-down-values.yaml")
	fe2 := stored["fe2"]
	assert.False(t, fe2.NodeSpec().IsUp())
	assert.False(t, v2alpha1.IsGated(fe2), "a down node is not gated")

	fe4 := stored["fe4"]
	assert.Equal(t, []v2alpha1.Prerequisite{{ExpressNode: "acme-fe1", Kind: "Frontend", PodConditionType: "Ready", ConditionStatus: "True"}},
		fe4.NodeSpec().DeploymentDependencies.UpgradePrerequisites, "the explicit list is kept, completed by the CRD's defaults")
	assert.False(t, defaults.IsDefaulted(fe4, defaults.UpgradeList))
	assert.True(t, defaults.IsDefaulted(fe4, defaults.ProvisioningList), "the list the chart left out is defaulted")
	assert.Equal(t, []string{"acme-fe3"}, names(fe4.NodeSpec().DeploymentDependencies.ProvisioningPrerequisites))
}
