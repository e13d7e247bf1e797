// Package cli drives express-sequencer from the outside, as users do: real
// kubectl against a real kube-apiserver + etcd with the webhooks registered.
package cli

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"

	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/test/framework/tenant"
)

var harness *controlplane.Harness

func TestMain(m *testing.M) {
	var err error
	if harness, err = controlplane.NewHarness(logr.Discard()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	stopFull()
	full.Stop()
	if err := harness.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	os.Exit(code)
}

func namespace(t *testing.T) string {
	return tenant.Suite{Client: harness.Client, Prefix: "e2e-"}.Namespace(t)
}

// kubectl runs the kubectl built with the control plane and returns its
// combined output.
func kubectl(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin := filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl")
	require.FileExists(t, bin, "kubectl comes with the control plane: run `make test`")
	kubeconfig, err := harness.KubeconfigFile(t.TempDir())
	require.NoError(t, err)
	out, err := exec.Command(bin, append([]string{"--kubeconfig", kubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}
