package cli

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/medallia/express-sequencer/test/framework/tenant"
)

// applyFile server-side applies the manifests of file into ns, as Argo CD
// does.
func applyFile(t *testing.T, c client.Client, ns, file string) {
	t.Helper()
	data, err := os.ReadFile(file)
	require.NoError(t, err)
	for _, doc := range strings.Split(string(data), "\n---") {
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &u.Object))
		if len(u.Object) == 0 {
			continue
		}
		u.SetNamespace(ns)
		require.NoError(t, c.Patch(context.Background(), u, client.Apply, client.FieldOwner("argocd-controller"), client.ForceOwnership))
	}
}

// settled waits until every node of ns is released and Ready on its target.
func settled(t *testing.T, c client.Client, ns string) {
	t.Helper()
	tenant.Suite{Client: c}.WaitSettled(t, ns, 0, 60*time.Second, nil)
}
