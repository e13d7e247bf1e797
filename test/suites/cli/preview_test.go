package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/medallia/express-sequencer/internal/golden"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/test/framework/gobuild"
	"github.com/medallia/express-sequencer/test/framework/tenantchart"
)

// render renders the tenant chart with overrides into a file.
func render(t *testing.T, name string, overrides map[string]any) string {
	t.Helper()
	manifests, _, err := tenantchart.Render(overrides)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), name+".yaml")
	require.NoError(t, os.WriteFile(path, []byte(manifests), 0o600))
	return path
}

var v154 = map[string]any{"Backend": "express-e689.154", "Frontend": "express-e689.154"}

func reversed() map[string]any {
	return map[string]any{
		"be":  map[string]any{"up": true},
		"fe1": map[string]any{"up": true, "upgradePrerequisites": []any{map[string]any{"expressNode": "acme-fe2", "kind": "Frontend"}}},
		"fe2": map[string]any{"up": true, "upgradePrerequisites": []any{}},
		"fe3": map[string]any{"up": true}, "fe4": map[string]any{"up": true},
	}
}

// pluginBinary builds kubectl-express once, from its own module, as users
// install it.
var pluginBinary = sync.OnceValues(func() (string, error) {
	return gobuild.Binary(filepath.Join("cmd", "kubectl-express"), "kubectl-express")
})

// express runs kubectl-express and returns its output, its errors and
// whether it failed.
func express(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	path, err := pluginBinary()
	require.NoError(t, err)
	var out, errOut bytes.Buffer
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.String(), errOut.String(), fmt.Errorf("%w: %s", err, errOut.String())
	}
	return out.String(), errOut.String(), nil
}

// steps reads the order out of plan -o json.
func steps(t *testing.T, out string) string {
	t.Helper()
	var r struct {
		Steps []struct {
			Nodes []string `json:"nodes"`
		} `json:"steps"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &r), out)
	var s []string
	for _, st := range r.Steps {
		s = append(s, strings.Join(st.Nodes, ","))
	}
	return strings.Join(s, " ")
}

func TestPlanPredictsTheOrderOfAChangeOffline(t *testing.T) {
	fe2Down := map[string]any{"fe2": map[string]any{"up": false}}
	for _, c := range []struct {
		name          string
		before, after map[string]any
		want          string
	}{
		{"a change to all nodes", map[string]any{}, map[string]any{"expressVersion": v154},
			"acme-fe1 acme-fe2 acme-be acme-fe3 acme-fe4"},
		{"a change to the frontends only", map[string]any{}, map[string]any{"expressVersion": map[string]any{"Backend": "express-e689.151", "Frontend": "express-e689.154"}},
			"acme-fe1 acme-fe2 acme-fe3 acme-fe4"},
		{"a change to all with fe2 down", map[string]any{"nodes": fe2Down}, map[string]any{"nodes": fe2Down, "expressVersion": v154},
			"acme-fe1 acme-be acme-fe3 acme-fe4"},
		{"a per-node override", map[string]any{}, map[string]any{"nodes": map[string]any{"fe3": map[string]any{"up": true, "expressVersion": "express-e689.154"}}},
			"acme-fe3"},
		{"an explicit reversal of fe1 and fe2 with a change to all", map[string]any{}, map[string]any{"nodes": reversed(), "expressVersion": v154},
			"acme-fe2 acme-fe1 acme-be acme-fe3 acme-fe4"},
		{"a new tenant", nil, map[string]any{}, "acme-be acme-fe1 acme-fe2 acme-fe3 acme-fe4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := []string{"plan", "--offline", "-f", render(t, "after", c.after)}
			if c.before != nil {
				args = append(args, "--current", render(t, "before", c.before))
			}
			out, errOut, err := express(t, append(args, "-o", "json")...)
			require.NoError(t, err, errOut)
			assert.Empty(t, errOut)
			assert.Equal(t, c.want, steps(t, out))
			table, _, err := express(t, args...)
			require.NoError(t, err)
			golden.Assert(t, "preview."+strings.ReplaceAll(c.name, " ", "-"), table)
		})
	}
}

func TestPlanRefusesFlagsThatDoNotGoTogether(t *testing.T) {
	_, _, err := express(t, "plan", "--offline")
	assert.ErrorContains(t, err, "--offline predicts from manifests: give them with -f")
	_, _, err = express(t, "plan", "--current", "x.yaml")
	assert.ErrorContains(t, err, "--current goes with --offline and -f")
	_, _, err = express(t, "plan", "-w", "-f", "x.yaml")
	assert.ErrorContains(t, err, "-w watches the live tenant")
	_, _, err = express(t, "plan", "--offline", "-f", filepath.Join(t.TempDir(), "none.yaml"))
	assert.ErrorContains(t, err, "none.yaml")
	_, _, err = express(t, "plan", "zeta", "--offline", "-f", render(t, "after", map[string]any{}))
	assert.ErrorContains(t, err, `the manifests hold no node of tenant "zeta" (they hold acme)`)
}

// full is a control plane with the whole of express-sequencer on
// Kubernetes' own control loops, and the Express operator's part: rollouts
// really happen.
var (
	fullPods *controlplane.PodLog
	stopFull = func() {}
	full     = controlplane.Lazy{Setup: func(h *controlplane.Harness) (err error) {
		fullPods, stopFull, err = realStack(h.ControlPlane)
		return err
	}}
)

// The order plan predicts for a change against the live tenant, through
// the API server's dry run, is the order the rollout then takes.
func TestPlanPredictsTheOrderTheRolloutThenTakes(t *testing.T) {
	h := full.Get(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "preview-"}}
	require.NoError(t, h.Client.Create(ctx, ns))
	applyFile(t, h.Client, ns.Name, render(t, "before", map[string]any{"namespace": ns.Name}))
	settled(t, h.Client, ns.Name)
	mark := len(startsIn(fullPods, ns.Name))

	after := render(t, "after", map[string]any{"namespace": ns.Name, "expressVersion": v154})
	kubeconfig, err := h.KubeconfigFile(t.TempDir())
	require.NoError(t, err)
	out, errOut, err := express(t, "plan", "acme", "-f", after, "-o", "json", "--kubeconfig", kubeconfig, "-n", ns.Name)
	require.NoError(t, err, errOut)
	predicted := steps(t, out)
	assert.Equal(t, "acme-fe1 acme-fe2 acme-be acme-fe3 acme-fe4", predicted)
	assert.Equal(t, mark, len(startsIn(fullPods, ns.Name)), "the prediction changed nothing")

	applyFile(t, h.Client, ns.Name, after)
	settled(t, h.Client, ns.Name)
	assert.Equal(t, predicted, strings.Join(startsIn(fullPods, ns.Name)[mark:], " "), "the rollout takes the predicted order")
}
