package sequencer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// The cache's snapshot of a tenant knows the names its nodes share with a
// node of the other kind, in another tenant too, as a fresh read of the
// namespace does: its plan holds the gated Frontend acme-fe1 and says why
// (NameShared), rather than release it for the release guard to refuse
// again and again with nothing said on the node.
func TestTheCachesSnapshotKnowsANameSharedWithAnotherTenantsNode(t *testing.T) {
	fe1 := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Namespace: "tenant", Generation: 1,
		Annotations: map[string]string{v2alpha1.AnnotationTargetHash: "h1"}}}
	fe1.Spec.ClusterConfig.ClusterName = "acme"
	fe1.Spec.AddGate(v2alpha1.GateSequencer)
	be := &v2alpha1.Backend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Namespace: "tenant"}}
	be.Spec.ClusterConfig.ClusterName = "zzz"
	cache := indexed(fake.NewClientBuilder()).WithObjects(fe1, be).Build()
	s, err := sequencer.Gather(context.Background(), cache, rollout.Tenant{Namespace: "tenant", ClusterName: "acme"}, defaults.Builtin(), time.Now(), time.Hour, rollout.Grouping{})
	require.NoError(t, err)
	assert.True(t, s.SharedNames["acme-fe1"])
	for _, d := range rollout.Plan(s) {
		if d.Node == "acme-fe1" {
			assert.True(t, d.Gated, d.Condition.Message)
			assert.Equal(t, v2alpha1.ReasonNameShared, d.Condition.Reason, d.Condition.Message)
		}
	}
}
