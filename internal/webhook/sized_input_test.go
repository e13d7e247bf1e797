package webhook_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// Input sized to hurt is admitted or refused with a message naming the
// field, through both webhooks and the API server's schema. How long each
// answer took is logged (go test -v -run TestInputSizedToHurt): the figures
// of docs/performance.md "Input sized to hurt".

func frontendWith(ns, name string, prereqs []v2alpha1.Prerequisite) v2alpha1.Node {
	n := seedNode(ns, "fe1")
	n.SetName(name)
	n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{UpgradePrerequisites: prereqs}
	return n
}

func upgradeOn(names ...string) []v2alpha1.Prerequisite {
	out := make([]v2alpha1.Prerequisite, len(names))
	for i, name := range names {
		out[i] = v2alpha1.Prerequisite{ExpressNode: name, Kind: v2alpha1.KindFrontend, PodConditionType: "Ready", ConditionStatus: "True"}
	}
	return out
}

func timed(t *testing.T, what string, f func() error) error {
	t.Helper()
	start := time.Now()
	err := f()
	t.Logf("%s: answered in %s", what, time.Since(start).Round(time.Millisecond))
	return err
}

func TestInputSizedToHurtIsAnsweredNamingTheField(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client

	t.Run("5,000 prerequisites are refused by the schema's limit", func(t *testing.T) {
		ns := namespace(t)
		names := make([]string, 5000)
		for i := range names {
			names[i] = fmt.Sprintf("acme-fe%d", i+2)
		}
		err := timed(t, "5,000 prerequisites", func() error { return c.Create(ctx, frontendWith(ns, "acme-fe1", upgradeOn(names...))) })
		require.Error(t, err)
		assert.True(t, apierrors.IsInvalid(err), "%v", err)
		assert.Contains(t, err.Error(), "spec.deploymentDependencies.upgradePrerequisites: Too many: 5000: must have at most 1000 items")
	})

	t.Run("1,000 prerequisites, the most there may be, are admitted", func(t *testing.T) {
		ns := namespace(t)
		names := make([]string, 1000)
		for i := range names {
			names[i] = fmt.Sprintf("acme-fe%d", i+2)
		}
		require.NoError(t, timed(t, "1,000 prerequisites", func() error { return c.Create(ctx, frontendWith(ns, "acme-fe1", upgradeOn(names...))) }))
	})

	t.Run("a 200-node cycle is refused naming its nodes", func(t *testing.T) {
		ns := namespace(t)
		for i := 1; i < 200; i++ {
			require.NoError(t, c.Create(ctx, frontendWith(ns, fmt.Sprintf("acme-fe%d", i), upgradeOn(fmt.Sprintf("acme-fe%d", i+1)))))
		}
		// The validating webhook reads the siblings from its cache (a cycle
		// closed within milliseconds of its last link may pass admission,
		// docs/sequencer.md): the closing node is written once it holds them.
		require.Eventually(t, func() bool {
			var list v2alpha1.FrontendList
			return env(t).Manager.GetClient().List(ctx, &list, client.InNamespace(ns)) == nil && len(list.Items) == 199
		}, 30*time.Second, 10*time.Millisecond)
		err := timed(t, "the node closing a 200-node cycle", func() error {
			return c.Create(ctx, frontendWith(ns, "acme-fe200", upgradeOn("acme-fe1")))
		})
		require.Error(t, err)
		assert.Contains(t, err.Error(), "spec.deploymentDependencies.upgradePrerequisites[0].expressNode")
		assert.Contains(t, err.Error(), "is a cycle")
		for _, n := range []string{"acme-fe1", "acme-fe100", "acme-fe199", "acme-fe200"} {
			assert.Contains(t, err.Error(), n+" ", "the cycle names %s", n)
		}
	})

	t.Run("1 MiB of fields only the Express CRD knows is admitted and kept whole", func(t *testing.T) {
		ns := namespace(t)
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(v2alpha1.GroupVersion.String())
		u.SetKind(v2alpha1.KindFrontend)
		u.SetNamespace(ns)
		u.SetName("acme-fe1")
		blob := map[string]any{}
		for i := range 256 {
			blob[fmt.Sprintf("key-%03d", i)] = strings.Repeat(string(rune('a'+i%26)), 4096)
		}
		u.Object["spec"] = map[string]any{"clusterConfig": map[string]any{"clusterName": "acme"}, "expressVersion": "express-e689.151",
			controlplane.PreservedField: map[string]any{"blob": blob}}
		require.NoError(t, timed(t, "1 MiB of unknown fields", func() error { return c.Create(ctx, u) }))
		got := &unstructured.Unstructured{}
		got.SetAPIVersion(v2alpha1.GroupVersion.String())
		got.SetKind(v2alpha1.KindFrontend)
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(u), got))
		kept, _, err := unstructured.NestedMap(got.Object, "spec", controlplane.PreservedField, "blob")
		require.NoError(t, err)
		assert.Equal(t, blob, kept)
		n := &v2alpha1.Frontend{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(u), n))
		assert.True(t, n.NodeSpec().HasGate(v2alpha1.GateSequencer), "admitted whole: gated")
	})

	t.Run("a name its pods' label can hold is admitted, a longer one refused naming metadata.name", func(t *testing.T) {
		ns := namespace(t)
		longest := "acme-fe" + strings.Repeat("1", 63-len("acme-fe"))
		require.NoError(t, c.Create(ctx, frontendWith(ns, longest, nil)))
		err := c.Create(ctx, frontendWith(ns, longest+"2", nil))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "metadata.name")
		assert.Contains(t, err.Error(), "must be no more than 63 bytes")
		assert.Contains(t, err.Error(), v2alpha1.LabelNode)
	})

	t.Run("labels and annotations at their limits are admitted and kept", func(t *testing.T) {
		ns := namespace(t)
		n := frontendWith(ns, "acme-fe1", nil)
		prefix := strings.Join([]string{strings.Repeat("p", 63), strings.Repeat("q", 63), strings.Repeat("r", 63), strings.Repeat("s", 61)}, ".")
		key := prefix + "/" + strings.Repeat("n", 63)
		n.SetLabels(map[string]string{key: strings.Repeat("v", 63)})
		n.SetAnnotations(map[string]string{"big": strings.Repeat("x", 200*1024)})
		require.NoError(t, timed(t, "labels and annotations at their limits", func() error { return c.Create(ctx, n) }))
		got := &v2alpha1.Frontend{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(n), got))
		assert.Equal(t, strings.Repeat("v", 63), got.GetLabels()[key])
		assert.Len(t, got.GetAnnotations()["big"], 200*1024)
	})
}
