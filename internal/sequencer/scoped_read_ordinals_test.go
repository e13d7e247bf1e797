package sequencer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// A StatefulSet whose ordinals start at spec.ordinals.start names its pods
// from there: a read by name reads those, not ordinals 0 and 1, and finds
// the node whole.
func TestAScopedReadReadsAStatefulSetsPodsFromItsFirstOrdinal(t *testing.T) {
	objects := settledBackendTenant(corev1.ConditionTrue, corev1.ConditionTrue)
	set := objects[2].(*appsv1.StatefulSet)
	set.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: 3}
	for i, o := range objects {
		if p, ok := o.(*corev1.Pod); ok {
			p.Name = map[string]string{"acme-be-0": "acme-be-3", "acme-be-1": "acme-be-4"}[p.Name]
			objects[i] = p
		}
	}
	r := indexed(fake.NewClientBuilder()).WithObjects(objects...).Build()
	// The cache knows no pod of the Backend: every ordinal is the
	// StatefulSet's to name.
	cached := rollout.SnapshotOf(rollout.Objects{Nodes: []v2alpha1.Node{objects[0].(v2alpha1.Node)}},
		rollout.Tenant{Namespace: "tenant", ClusterName: "acme"}, defaults.Builtin(), time.Now())

	snap, why, err := sequencer.GatherScoped(context.Background(), indexed(fake.NewClientBuilder()).Build(), r, cached, []string{"acme-be"})
	require.NoError(t, err)
	require.True(t, why.None(), why.Why)
	var names []string
	for _, p := range snap.Pods["acme-be"] {
		names = append(names, p.Name)
	}
	assert.ElementsMatch(t, []string{"acme-be-3", "acme-be-4"}, names)
	assert.Zero(t, snap.MissingPods["acme-be"], "no pod is missing")

	ok, why, err := sequencer.MayStartByName(context.Background(), indexed(fake.NewClientBuilder()).WithObjects(objects[0], objects[1]).Build(),
		r, "tenant", "acme-fe1", "", defaults.Builtin(), time.Now(), rollout.Grouping{})
	require.NoError(t, err)
	assert.True(t, ok, "fe1's pod starts on be's two pods read by name: %s", why.Why)
}
