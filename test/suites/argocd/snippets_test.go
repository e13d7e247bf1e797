// Package argocd checks the Argo CD snippets of config/argocd against the
// health check the framework runs.
package argocd

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"

	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	lua "github.com/medallia/express-sequencer/test/framework/argocd"
)

// The argocd-cm snippet and the argo-cd chart values carry health.lua
// exactly, under the key Argo CD looks up for each kind.
func TestTheArgoCDSnippetsCarryTheHealthCheckExactly(t *testing.T) {
	script, err := lua.HealthScript()
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
