package chart

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/test/framework/tenantchart"
)

// rolloutIDs renders the chart in dir and returns the rollout-id of every
// node it renders.
func rolloutIDs(t *testing.T, dir string, overrides map[string]any) []string {
	t.Helper()
	_, nodes, err := tenantchart.RenderDir(dir, overrides)
	require.NoError(t, err)
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.GetAnnotations()[v2alpha1.AnnotationRolloutID])
	}
	require.NotEmpty(t, ids)
	require.NotContains(t, ids, "", "the chart renders a rollout-id on every node")
	return ids
}

// copyChart copies the tenant chart into a temporary directory, with edit
// applied to the named template: a new version of the chart.
func copyChart(t *testing.T, template string, edit func(string) string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.CopyFS(dir, os.DirFS(tenantchart.Dir())))
	path := filepath.Join(dir, "templates", template)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	edited := edit(string(data))
	require.NotEqual(t, string(data), edited, "the edit changes the template")
	require.NoError(t, os.WriteFile(path, []byte(edited), 0o644))
	return dir
}

// One rollout-id per render, new whenever any node's spec changes — by the
// values or by the chart's templates, whose change the values do not show —
// so that express-sequencer holds every change applied node by node until
// it has fully landed, however slowly, without a settle time.
func TestTheRolloutIDChangesWithAnyNodesSpec(t *testing.T) {
	base := rolloutIDs(t, tenantchart.Dir(), nil)
	for _, id := range base {
		assert.Equal(t, base[0], id, "one rollout-id for every node of a render")
	}
	for _, c := range []struct {
		name string
		dir  string
		vals map[string]any
		same bool
	}{
		{name: "the same values render the same rollout-id", dir: tenantchart.Dir(), same: true},
		{name: "a new version in the values renders a new rollout-id", dir: tenantchart.Dir(),
			vals: map[string]any{"expressVersion": map[string]any{"Frontend": "express-e689.999"}}},
		{name: "a new template default for configChangeset renders a new rollout-id, the values unchanged",
			dir: copyChart(t, "_helpers.tpl", func(s string) string {
				return strings.Replace(s, `get $root.Values.configChangeset $kind) | quote }}`, `get $root.Values.configChangeset $kind | printf "%s-2") | quote }}`, 1)
			})},
		{name: "a template change to the labels only renders the same rollout-id", same: true,
			dir: copyChart(t, "nodes.yaml", func(s string) string {
				return strings.Replace(s, "express.medallia.com/source-deployer: argocd", "express.medallia.com/source-deployer: argocd\n    example.com/new-label: x", 1)
			})},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := rolloutIDs(t, c.dir, c.vals)
			if c.same {
				assert.Equal(t, base, got)
				return
			}
			assert.Len(t, got, len(base))
			for _, id := range got {
				assert.Equal(t, got[0], id, "one rollout-id for every node of a render")
				assert.NotEqual(t, base[0], id, "a new rollout-id")
			}
		})
	}
}

// Every node of a render lists the nodes the render renders — one list,
// naming each node once — and a node dropped from the values is in no
// render's list: it is no part of the tenant's changes.
func TestARenderListsTheNodesItRenders(t *testing.T) {
	names := func(nodes []v2alpha1.Node) string {
		var out []string
		for _, n := range nodes {
			out = append(out, n.GetName())
		}
		slices.Sort(out)
		return strings.Join(out, ",")
	}
	_, nodes, err := tenantchart.Render(nil)
	require.NoError(t, err)
	require.NotEmpty(t, nodes)
	for _, n := range nodes {
		assert.Equal(t, names(nodes), n.GetAnnotations()[v2alpha1.AnnotationRenderedNodes], "%s lists every node of the render", n.GetName())
	}
	_, fewer, err := tenantchart.Render(map[string]any{"nodes": map[string]any{"fe4": nil}})
	require.NoError(t, err)
	require.Len(t, fewer, len(nodes)-1, "fe4 dropped from the values")
	for _, n := range fewer {
		assert.Equal(t, names(fewer), n.GetAnnotations()[v2alpha1.AnnotationRenderedNodes])
		assert.NotContains(t, n.GetAnnotations()[v2alpha1.AnnotationRenderedNodes], "-fe4")
	}
}
