package sequencer_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// A machine is read in a scoped read to tell whether the pods on it still
// run: a machine that cannot be read fails the read, said once however
// many pods run on it, whether they are Ready or not — a pod not Ready may
// still meet a condition an explicit entry asks for (ContainersReady), and
// taken as lost it would meet none: more waits, on state no one saw
// (docs/sequencer.md).
func TestAScopedReadFailsWhereAPodRunsOnAMachineItCannotRead(t *testing.T) {
	for _, c := range []struct {
		name  string
		ready corev1.ConditionStatus
	}{
		{"a machine that cannot be read fails the read, named once, where two Ready pods run on it", corev1.ConditionTrue},
		{"a machine that cannot be read fails the read where the pods on it are not Ready too", corev1.ConditionFalse},
	} {
		t.Run(c.name, func(t *testing.T) {
			objects := settledBackendTenant(c.ready, c.ready)
			for _, o := range objects {
				if p, ok := o.(*corev1.Pod); ok {
					p.Status.Conditions = append(p.Status.Conditions, corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue})
				}
			}
			be := objects[0].(*v2alpha1.Backend)
			var machineReads atomic.Int32
			r := indexed(fake.NewClientBuilder()).WithObjects(objects...).
				WithInterceptorFuncs(interceptor.Funcs{
					Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						if _, ok := obj.(*corev1.Node); ok {
							machineReads.Add(1)
							return apierrors.NewInternalError(errors.New("etcd stalled"))
						}
						return c.Get(ctx, key, obj, opts...)
					},
				}).Build()
			tenant := rollout.Tenant{Namespace: "tenant", ClusterName: "acme"}
			cached := rollout.SnapshotOf(rollout.Objects{Nodes: []v2alpha1.Node{be}}, tenant, defaults.Builtin(), time.Now())

			_, why, err := sequencer.GatherScoped(context.Background(), r, r, cached, []string{"acme-be"})
			assert.True(t, why.None(), "the naming rule holds: %s", why.Why)
			assert.Equal(t, int32(1), machineReads.Load(), "the machine both pods run on is read once")
			require.Error(t, err)
			assert.Equal(t, 1, strings.Count(err.Error(), "machine-1"), "the machine is named once: %v", err)
		})
	}
}
