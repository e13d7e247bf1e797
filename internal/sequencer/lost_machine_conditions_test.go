package sequencer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// A machine lost: the node lifecycle controller has marked be's pods on it
// not Ready, and left ContainersReady=True as the lost kubelet last said
// (it marks only Ready). An explicit entry may ask for ContainersReady, so
// the machine of a pod that is not Ready is read too, by the read of the
// whole tenant and by the scoped read: its pods meet no condition.
func TestPodsMarkedNotReadyOnALostMachineMeetNoConditionTheKubeletLeft(t *testing.T) {
	for _, c := range []struct {
		name    string
		machine corev1.ConditionStatus
		meets   bool
	}{
		{"pods on a machine that is not Ready keep no condition", corev1.ConditionFalse, false},
		{"pods on a Ready machine keep theirs (the control)", corev1.ConditionTrue, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			objects := settledBackendTenant(corev1.ConditionFalse, corev1.ConditionFalse)
			for _, o := range objects {
				switch o := o.(type) {
				case *corev1.Pod:
					o.Status.Conditions = append(o.Status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue})
				case *corev1.Node:
					o.Status.Conditions[0].Status = c.machine
				}
			}
			be := objects[0].(*v2alpha1.Backend)
			tenant := rollout.Tenant{Namespace: "tenant", ClusterName: "acme"}
			meets := func(s *rollout.Snapshot) {
				t.Helper()
				require.Len(t, s.Pods["acme-be"], 2)
				for _, p := range s.Pods["acme-be"] {
					assert.Equal(t, c.meets, p.Conditions[string(corev1.ContainersReady)] == string(corev1.ConditionTrue), "%s: %v", p.Name, p.Conditions)
				}
			}

			whole, err := sequencer.GatherFresh(context.Background(), indexed(fake.NewClientBuilder()).WithObjects(cloned(objects)...).Build(),
				tenant, defaults.Builtin(), time.Now(), rollout.DefaultProgressDeadline, rollout.Grouping{})
			require.NoError(t, err)
			meets(whole)

			r := indexed(fake.NewClientBuilder()).WithObjects(cloned(objects)...).Build()
			cached := rollout.SnapshotOf(rollout.Objects{Nodes: []v2alpha1.Node{be}}, tenant, defaults.Builtin(), time.Now())
			scoped, why, err := sequencer.GatherScoped(context.Background(), r, r, cached, []string{"acme-be"})
			require.NoError(t, err)
			require.True(t, why.None(), "the naming rule holds: %s", why.Why)
			meets(scoped)
		})
	}
}
