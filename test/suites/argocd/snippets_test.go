// Package argocd checks the Argo CD snippets of config/argocd: they carry
// the health check, and Argo CD's own code reads it from them.
package argocd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/test/framework/argocd"
)

// The argocd-cm snippet and the argo-cd chart values carry health.lua
// exactly, under the key Argo CD looks up for each kind.
func TestTheArgoCDSnippetsCarryTheHealthCheckExactly(t *testing.T) {
	script, err := argocd.HealthScript()
	require.NoError(t, err)
	read := func(name string, into any) {
		b, err := os.ReadFile(filepath.Join(controlplane.Root(), "config", "argocd", name))
		require.NoError(t, err)
		require.NoError(t, yaml.Unmarshal(b, into))
	}
	var cm struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
	}
	read("argocd-cm.yaml", &cm)
	var values struct {
		Configs struct {
			CM map[string]string `json:"cm"`
		} `json:"configs"`
	}
	read("argo-cd-values.yaml", &values)
	assert.Equal(t, "ConfigMap", cm.Kind)
	for _, kind := range []string{"Backend", "Frontend"} {
		key := "resource.customizations.health.express.medallia.com_" + kind
		assert.Equal(t, script, cm.Data[key], "argocd-cm %s", key)
		assert.Equal(t, script, values.Configs.CM[key], "argo-cd values configs.cm %s", key)
	}
}

// Argo CD's settings manager finds the health check for both kinds in the
// argocd-cm snippet and in the argo-cd chart's values (configs.cm, which
// the chart renders into argocd-cm), and Argo CD's Lua evaluation runs it:
// a node admitted and gated, not yet looked at by the sequencer, is
// Progressing.
func TestArgoCDReadsTheHealthCheckFromBothSnippets(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(controlplane.Root(), "config", "argocd", "argo-cd-values.yaml"))
	require.NoError(t, err)
	var values struct {
		Configs struct {
			CM map[string]string `json:"cm"`
		} `json:"configs"`
	}
	require.NoError(t, yaml.Unmarshal(b, &values))
	fromValues := filepath.Join(t.TempDir(), "argocd-cm.yaml")
	cm, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "argocd-cm"}, "data": values.Configs.CM})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(fromValues, cm, 0o600))
	for _, file := range []string{argocd.ConfigMap(), fromValues} {
		for _, kind := range []string{"Backend", "Frontend"} {
			obj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "express.medallia.com/v2alpha1", "kind": kind,
				"metadata": map[string]any{"name": "acme-x", "namespace": "t", "generation": int64(1)},
				"spec":     map[string]any{"rolloutGates": []any{map[string]any{"name": "express.medallia.com/sequencer"}}},
			}}
			s, err := argocd.Health(file, obj)
			require.NoError(t, err, "%s: %s", file, kind)
			assert.Equal(t, argocd.Progressing, s.Status, "%s: %s", file, kind)
			assert.Contains(t, s.Message, "gated: waiting for express-sequencer", "%s: %s", file, kind)
		}
	}
	_, err = argocd.Health(filepath.Join(t.TempDir(), "none.yaml"), &unstructured.Unstructured{Object: map[string]any{"apiVersion": "express.medallia.com/v2alpha1", "kind": "Backend"}})
	assert.ErrorContains(t, err, "none.yaml", "a missing argocd-cm is an error, not a health")
	empty := filepath.Join(t.TempDir(), "argocd-cm.yaml")
	require.NoError(t, os.WriteFile(empty, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: argocd-cm}\n"), 0o600))
	_, err = argocd.Health(empty, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "express.medallia.com/v2alpha1", "kind": "Backend"}})
	assert.ErrorContains(t, err, "Argo CD has no health check for express.medallia.com/v2alpha1, Kind=Backend", "an argocd-cm without the snippet")
}
