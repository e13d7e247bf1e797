package chart

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
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/test/framework/tenantchart"
)

var harness *controlplane.Harness

func TestMain(m *testing.M) {
	var err error
	// The webhooks only: what is stored is what admission made of the
	// chart. No pod runs, so no release would stand the release guard; the
	// Argo CD diff tests release nodes as the sequencer does, to diff its
	// record too (the guard is tested in the webhook and integration
	// suites).
	if harness, err = controlplane.NewHarness(logr.Discard(), func(o *app.Options) { o.Sequencer, o.RecheckReleases = false, false }); err != nil {
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
		files = append(files, filepath.Join(tenantchart.Dir(), "ci", valuesFile))
	}
	_, nodes, err := tenantchart.Render(map[string]any{"namespace": ns.Name}, files...)
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
		data, err := os.ReadFile(filepath.Join(tenantchart.Dir(), f))
		require.NoError(t, err)
		for _, word := range []string{"allNodeConfig", "provisioningDependency", "upgradeDependency"} {
			assert.NotContains(t, string(data), word, f)
		}
	}
	manifests, _, err := tenantchart.Render(nil)
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

// helm lint, with Helm's own lint action, for the chart's values and every
// CI values file: no error and no warning.
func TestTheChartLintsClean(t *testing.T) {
	files, err := filepath.Glob(filepath.Join(tenantchart.Dir(), "ci", "*.yaml"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for _, f := range append([]string{""}, files...) {
		vals := map[string]any{}
		if f != "" {
			v, err := chartutil.ReadValuesFile(f)
			require.NoError(t, err)
			vals = v.AsMap()
		}
		result := action.NewLint().Run([]string{tenantchart.Dir()}, vals)
		assert.Empty(t, result.Errors, "values %s", filepath.Base(f))
		for _, m := range result.Messages {
			assert.Less(t, m.Severity, support.WarningSev, "values %s: %s", filepath.Base(f), m)
		}
	}
}

func TestTheValuesSchemaRejectsBadValuesNamingThem(t *testing.T) {
	for _, c := range []struct {
		name   string
		values map[string]any
		want   string
	}{
		{"a node key that is neither be nor feN", map[string]any{"nodes": map[string]any{"be": map[string]any{"up": true}, "frontend2": map[string]any{"up": true}}},
			"at '/nodes': additional properties 'frontend2' not allowed"},
		{"an up that is not a boolean", map[string]any{"nodes": map[string]any{"fe1": map[string]any{"up": "yes"}}},
			"at '/nodes/fe1/up': got string, want boolean"},
		{"a prerequisite without expressNode", map[string]any{"nodes": map[string]any{"fe3": map[string]any{
			"upgradePrerequisites": []any{map[string]any{"kind": "Frontend"}}}}},
			"at '/nodes/fe3/upgradePrerequisites/0': missing property 'expressNode'"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := tenantchart.Render(c.values)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

func TestDisableDependenciesPerNodeEmptiesOnlyThatNodesLists(t *testing.T) {
	stored := applyChart(t, "per-node-disable-values.yaml")
	fe3 := stored["fe3"].NodeSpec().DeploymentDependencies
	require.NotNil(t, fe3)
	assert.Equal(t, []v2alpha1.Prerequisite{}, fe3.ProvisioningPrerequisites)
	assert.Equal(t, []v2alpha1.Prerequisite{}, fe3.UpgradePrerequisites)
	for _, key := range []string{"be", "fe1", "fe2", "fe4"} {
		assert.True(t, defaults.IsDefaulted(stored[key], defaults.ProvisioningList), key)
		assert.True(t, defaults.IsDefaulted(stored[key], defaults.UpgradeList), key)
	}
	assert.Equal(t, []string{"acme-fe3"}, names(stored["fe4"].NodeSpec().DeploymentDependencies.ProvisioningPrerequisites),
		"fe3 rolls on its own, and still has its place in the others' order")
}

// What the user's chart had besides the ordering table: per-node revision
// (spec and label), changeset and version, the Argo CD external link, the
// common labels, dc and provisioning — stored as rendered.
func TestTheChartKeepsWhatTheUsersChartHad(t *testing.T) {
	stored := applyChart(t, "explicit-prerequisite-values.yaml")
	fe1 := stored["fe1"]
	assert.Equal(t, "r42", fe1.NodeSpec().DeploymentRevision)
	assert.Equal(t, "r42", fe1.GetLabels()["express.medallia.com/deployment-revision"])
	assert.Equal(t, "https://acme-fe1.den.express.internal/.cmdCenter", fe1.GetAnnotations()["link.argocd.argoproj.io/external-link"])
	assert.Equal(t, "5d41402abc4b2a76b9719d911017c592", stored["fe2"].NodeSpec().ConfigChangeset)
	assert.Equal(t, "867fc47c2326a5b00893b3b0f3d2d7c66b634579", stored["fe3"].NodeSpec().ConfigChangeset)
	for key, n := range stored {
		l := n.GetLabels()
		assert.Equal(t, "den", l["express.medallia.com/dc"], key)
		assert.Equal(t, "false", l["express.medallia.com/provisioning"], key)
		assert.Equal(t, "123634", l["express.medallia.com/tenant-id"], key)
		assert.Equal(t, "express-tenant-0.1.0", l["helm.sh/chart"], key)
		assert.Equal(t, "argocd", l["express.medallia.com/source-deployer"], key)
	}
	assert.Equal(t, []v2alpha1.Prerequisite{{ExpressNode: "acme-fe1", Kind: "Frontend", ExpressVersion: "express-e689.151", PodConditionType: "Ready", ConditionStatus: "True"}},
		stored["fe4"].NodeSpec().DeploymentDependencies.UpgradePrerequisites, "rendered complete: stored exactly as rendered")
}
