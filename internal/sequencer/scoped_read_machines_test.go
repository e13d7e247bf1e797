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
// run: a machine that cannot be read fails the read where a Ready pod runs
// on it, said once however many do, and is no error where none does — its
// pods, not Ready, then meet no condition either (ContainersReady, which
// the lost kubelet may have left True), so they hold and let nothing go
// (docs/sequencer.md).
func TestAScopedReadFailsOnlyWhereAReadyPodRunsOnAMachineItCannotRead(t *testing.T) {
	for _, c := range []struct {
		name  string
		ready corev1.ConditionStatus
		fails bool
	}{
		{"a machine that cannot be read fails the read, named once, where two Ready pods run on it", corev1.ConditionTrue, true},
		{"a machine that cannot be read is no error where the pods on it are not Ready", corev1.ConditionFalse, false},
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

			snap, why, err := sequencer.GatherScoped(context.Background(), r, r, cached, []string{"acme-be"})
			assert.True(t, why.None(), "the naming rule holds: %s", why.Why)
			assert.Equal(t, int32(1), machineReads.Load(), "the machine both pods run on is read once")
			if c.fails {
				require.Error(t, err)
				assert.Equal(t, 1, strings.Count(err.Error(), "machine-1"), "the machine is named once: %v", err)
				return
			}
			require.NoError(t, err)
			require.Len(t, snap.Pods["acme-be"], 2, "both pods are read")
			for _, p := range snap.Pods["acme-be"] {
				assert.Empty(t, p.Conditions, "%s, on a machine that cannot be read, meets no condition", p.Name)
			}
		})
	}
}
