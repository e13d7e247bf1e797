package sequencer_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// A pod admission's read by name reads, as a Backend and as a Frontend,
// every name its start rests on; where a Backend and a Frontend share one —
// of two tenants, or one — which is the tenant's only the read of the
// whole tenant tells, and the tenant is read whole.
func TestAPodAdmissionReadsByNameTheNodesItsStartRestsOn(t *testing.T) {
	backend := func(name, cluster string) client.Object {
		n := &v2alpha1.Backend{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant"}}
		n.Spec.ClusterConfig.ClusterName = cluster
		return n
	}
	frontend := func(name, cluster string) client.Object {
		n := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant"}}
		n.Spec.ClusterConfig.ClusterName = cluster
		return n
	}
	for _, c := range []struct {
		name      string
		objects   []client.Object
		wantNodes []string
		fallback  string
	}{
		{
			name:      "the Frontend and the Backend before it are read",
			objects:   []client.Object{backend("acme-be", "acme"), frontend("acme-fe1", "acme"), frontend("acme-fe2", "acme")},
			wantNodes: []string{"acme-be", "acme-fe1"},
		},
		{
			name:     "a Frontend of another tenant named as the Backend has the tenant read whole",
			objects:  []client.Object{backend("acme-be", "acme"), frontend("acme-be", "other"), frontend("acme-fe1", "acme")},
			fallback: rollout.FallbackNaming,
		},
		{
			name:     "a node not in the cache has its tenant read whole",
			objects:  []client.Object{backend("acme-be", "acme")},
			fallback: rollout.FallbackCache,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := indexed(fake.NewClientBuilder()).WithObjects(c.objects...).
				Build()
			snap, why, err := sequencer.GatherForPod(context.Background(), r, r, "tenant", "acme-fe1", defaults.Builtin(), time.Now(), rollout.Grouping{})
			require.NoError(t, err)
			assert.Equal(t, c.fallback, why.Label, why.Why)
			if c.fallback != "" {
				assert.Nil(t, snap)
				return
			}
			require.NotNil(t, snap)
			var got []string
			for name := range snap.Nodes {
				got = append(got, name)
			}
			slices.Sort(got)
			assert.Equal(t, c.wantNodes, got, "fe2 is no predecessor of fe1: not read")
			assert.False(t, rollout.PodsMayStartByName(snap, "acme-fe1"), "the Backend has no pod: fe1's pod does not start on this read")
		})
	}
}
