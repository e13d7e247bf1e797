package sequencer_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// The sequencer's scoped read (GatherScoped) is many GETs, each answered at
// its own moment. be is released for h1 and rolling, its StatefulSet
// wants two pods, and the cache has seen only be-0, Ready. be-0 is read
// Ready in the first round trip; right after, it crashes and be-1 turns
// Ready, and be-1 is read Ready in the second. be's two pods were never
// Ready together, and a RolloutComplete record, which the release guard
// does not judge, may not rest on them: read again, be-0 is not as read,
// and the tenant is read whole, on which be has not converged. Where
// nothing changes while the workload is read, the plan is made on it.
func TestAScopedReadNotOneMomentRecordsNoRolloutComplete(t *testing.T) {
	for name, c := range map[string]struct {
		crashWhileRead bool
		read           string
		fallback       string
		complete       bool
	}{
		"be-0 crashing and be-1 turning Ready while they are read have the tenant read whole": {
			crashWhileRead: true, read: rollout.ReadTenant, fallback: rollout.FallbackMoved,
		},
		"two pods Ready while they are read record be's rollout complete on the scoped read": {
			read: rollout.ReadDecision, complete: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			be1 := corev1.ConditionFalse
			if !c.crashWhileRead {
				be1 = corev1.ConditionTrue
			}
			tenant := settledBackendTenant(corev1.ConditionTrue, be1)
			be := tenant[0].(*v2alpha1.Backend)
			be.Annotations = map[string]string{v2alpha1.AnnotationTargetHash: "h1", v2alpha1.AnnotationReleasedTarget: "h1"}
			for _, o := range tenant {
				if p, ok := o.(*corev1.Pod); ok {
					p.Labels[v2alpha1.LabelTargetHash] = "h1"
				}
			}
			// The cache has seen be-0, not be-1 nor the machine.
			cache := indexed(fake.NewClientBuilder()).WithObjects(cloned(tenant[:len(tenant)-2])...).Build()
			var once sync.Once
			var crashErr error // set on a read's goroutine, asserted on the test's
			fresh := indexed(fake.NewClientBuilder()).WithObjects(cloned(tenant)...).
				WithInterceptorFuncs(interceptor.Funcs{
					Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
						err := cl.Get(ctx, key, obj, opts...)
						if key.Name == "acme-be-0" && c.crashWhileRead {
							once.Do(func() {
								crashErr = errors.Join(setReady(ctx, cl, "acme-be-0", corev1.ConditionFalse), setReady(ctx, cl, "acme-be-1", corev1.ConditionTrue))
							})
						}
						return err
					},
				}).Build()
			tn := rollout.Tenant{Namespace: "tenant", ClusterName: "acme"}
			now := time.Now()
			cached, err := sequencer.Gather(ctx, cache, tn, defaults.Builtin(), now, time.Hour, rollout.Grouping{})
			require.NoError(t, err)
			readScoped := func(scope []string) (*rollout.Snapshot, rollout.Fallback, error) {
				return sequencer.GatherScoped(ctx, cache, fresh, cached, scope)
			}
			readFresh := func() (*rollout.Snapshot, error) {
				return sequencer.GatherFresh(ctx, fresh, tn, defaults.Builtin(), now, time.Hour, rollout.Grouping{})
			}
			_, decisions, read, why, err := rollout.PlanOnScoped(cached, readScoped, readFresh)
			require.NoError(t, err)
			require.NoError(t, crashErr, "the crash written while be-0 was read")
			assert.Equal(t, c.read, read, "the read planned on (%s)", why.Why)
			assert.Equal(t, c.fallback, why.Label, why.Why)
			var complete bool
			for _, d := range decisions {
				complete = complete || d.Node == "acme-be" && d.Condition.Reason == v2alpha1.ReasonRolloutComplete
			}
			assert.Equal(t, c.complete, complete, "be's rollout recorded complete")
		})
	}
}
