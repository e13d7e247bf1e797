package sequencer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/sequencer"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// Two nodes of a tenant carry a departure dated a day ahead (a webhook
// replica whose clock ran ahead). fe1's is dated again at the sequencer's
// now. fe2's write is refused (a policy freezes it): the tenant is planned
// as it is, and the write is tried again a minute later, not at every
// pass.
func TestADepartureDatedAheadIsDatedAgainOrTriedAgainAMinuteLater(t *testing.T) {
	h := apiServer.Get(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "redate-"}}
	require.NoError(t, h.Client.Create(ctx, ns))
	start := time.Now()
	ahead := start.Add(24 * time.Hour).UTC().Format(time.RFC3339Nano)
	var nodes []v2alpha1.Node
	for _, name := range []string{"acme-fe1", "acme-fe2"} {
		fe := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name},
			Spec: v2alpha1.NodeSpec{ExpressVersion: "express-e689.151", ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "acme"}}}
		require.NoError(t, h.Client.Create(ctx, fe))
		patch := []byte(`{"metadata":{"annotations":{"` + v2alpha1.AnnotationNodeLeftTenantAt + `":"` + ahead + `"}}}`)
		require.NoError(t, h.Client.Patch(ctx, fe, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(v2alpha1.FieldManager)))
		require.Equal(t, ahead, fe.Annotations[v2alpha1.AnnotationNodeLeftTenantAt], "dated ahead, as the sequencer")
		nodes = append(nodes, fe)
	}
	controlplane.Freeze(t, h.Client, ns.Name, nodes[1])

	patches := 0
	direct, err := client.NewWithWatch(h.Config, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	counting := interceptor.NewClient(direct, interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			patches++
			return c.Patch(ctx, obj, patch, opts...)
		},
	})
	clk := clocktesting.NewFakeClock(start)
	r := &sequencer.Reconciler{Client: counting, Clock: clk}
	pass := func() (bool, time.Duration) {
		snap := &rollout.Snapshot{Tenant: rollout.Tenant{Namespace: ns.Name, ClusterName: "acme"}, Now: clk.Now(),
			Grouping: rollout.Grouping{SettleTime: 10 * time.Second}, Nodes: map[string]v2alpha1.Node{}}
		for _, n := range nodes {
			got := &v2alpha1.Frontend{}
			require.NoError(t, h.Client.Get(ctx, client.ObjectKeyFromObject(n), got))
			snap.Nodes[got.Name] = got
		}
		return r.DateFutureDeparturesAgain(ctx, snap)
	}
	stored := func(n v2alpha1.Node) time.Time {
		got := &v2alpha1.Frontend{}
		require.NoError(t, h.Client.Get(ctx, client.ObjectKeyFromObject(n), got))
		_, marker := got.Annotations[v2alpha1.AnnotationNodeLeftTenantAtReplaces]
		assert.False(t, marker, "the date it replaced is not stored")
		return rollout.NodeLeftTenantAt(got)
	}

	wrote, retry := pass()
	assert.True(t, wrote, "fe1 dated again")
	assert.Equal(t, time.Minute, retry, "fe2 tried again in a minute")
	assert.Equal(t, 2, patches)
	assert.False(t, stored(nodes[0]).After(time.Now()), "fe1 dated again at the sequencer's now, no later than the webhook's")
	assert.True(t, stored(nodes[1]).After(start.Add(23*time.Hour)), "fe2 refused: still ahead")

	clk.Step(30 * time.Second)
	wrote, retry = pass()
	assert.False(t, wrote)
	assert.Equal(t, 30*time.Second, retry, "fe2 waits out its minute")
	assert.Equal(t, 2, patches, "nothing written: fe1 is no longer ahead, fe2 not tried again yet")

	clk.Step(31 * time.Second)
	wrote, retry = pass()
	assert.False(t, wrote)
	assert.Equal(t, time.Minute, retry, "fe2 refused again")
	assert.Equal(t, 3, patches, "fe2 tried again once its minute was over")
}
