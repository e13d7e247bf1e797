package sequencer_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// A read by name is many reads, each at its own moment: a pod of fe1 is let
// start on it only where everything read is read again unchanged, so that
// be was whole and Ready at one moment (docs/sequencer.md).
func TestAPodIsLetStartByNameOnlyOnWhatHeldAtOneMoment(t *testing.T) {
	for _, c := range []struct {
		name string
		// between runs once, on the API server, right after the first
		// read of the object called after.
		after   string
		between func(ctx context.Context, c client.Client) error
		// be1 is be-1's Ready condition before.
		be1      corev1.ConditionStatus
		mayStart bool
		fallback string
	}{
		{
			name:     "a tenant that holds still lets the pod start on its read by name",
			after:    "acme-be-0",
			between:  func(context.Context, client.Client) error { return nil },
			be1:      corev1.ConditionTrue,
			mayStart: true,
		},
		{
			name:  "be-0 crashing and be-1 turning Ready between their reads has the tenant read whole",
			after: "acme-be-0",
			between: func(ctx context.Context, c client.Client) error {
				if err := setReady(ctx, c, "acme-be-0", corev1.ConditionFalse); err != nil {
					return err
				}
				return setReady(ctx, c, "acme-be-1", corev1.ConditionTrue)
			},
			be1:      corev1.ConditionFalse,
			fallback: rollout.FallbackMoved,
		},
		{
			name:  "a machine lost and back between the reads has the tenant read whole: Ready at both, it was not in between",
			after: "machine-1",
			between: func(ctx context.Context, c client.Client) error {
				if err := touchMachine(ctx, c, "machine-1", corev1.ConditionUnknown); err != nil {
					return err
				}
				return touchMachine(ctx, c, "machine-1", corev1.ConditionTrue)
			},
			be1:      corev1.ConditionTrue,
			fallback: rollout.FallbackMoved,
		},
		{
			name:  "a machine lost between the reads has the tenant read whole",
			after: "machine-1",
			between: func(ctx context.Context, c client.Client) error {
				return touchMachine(ctx, c, "machine-1", corev1.ConditionUnknown)
			},
			be1:      corev1.ConditionTrue,
			fallback: rollout.FallbackMoved,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			tenant := settledBackendTenant(corev1.ConditionTrue, c.be1)
			// The cache has not seen be-1: it is read in the second round
			// trip, after the StatefulSet says there are two.
			cache := indexed(fake.NewClientBuilder()).WithObjects(tenant[:len(tenant)-2]...).Build()
			fresh := func() client.Client {
				var once sync.Once
				return indexed(fake.NewClientBuilder()).WithObjects(cloned(tenant)...).
					WithInterceptorFuncs(interceptor.Funcs{
						Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
							err := cl.Get(ctx, key, obj, opts...)
							if key.Name == c.after {
								once.Do(func() { assert.NoError(t, c.between(ctx, cl)) })
							}
							return err
						},
					}).Build()
			}

			ok, why, err := sequencer.MayStartByName(ctx, cache, fresh(), "tenant", "acme-fe1", "", defaults.Builtin(), time.Now(), rollout.Grouping{})
			require.NoError(t, err)
			assert.Equal(t, c.mayStart, ok, why.Why)
			assert.Equal(t, c.fallback, why.Label, why.Why)

			// Without the second read the pod would be let start: the
			// check above is what holds it.
			snap, why, err := sequencer.GatherForPod(ctx, cache, fresh(), "tenant", "acme-fe1", defaults.Builtin(), time.Now(), rollout.Grouping{})
			require.NoError(t, err)
			require.True(t, why.None(), why.Why)
			assert.True(t, rollout.PodsMayStartByName(snap, "acme-fe1"), "read once, fe1's pod may start")
		})
	}
}

// A pod of a node the cache has in one tenant and the API server in
// another, or not at all, is not held on the read by name: the tenant is
// read whole, which admits a pod of a node gone with a warning and judges
// one of a node moved in its tenant now.
func TestAPodOfANodeNotAsTheCacheHasItIsAnsweredOnTheWholeTenant(t *testing.T) {
	for _, c := range []struct {
		name  string
		fresh func(fe1 *v2alpha1.Frontend) client.Object
	}{
		{"fe1 moved to another tenant since the cache saw it", func(fe1 *v2alpha1.Frontend) client.Object {
			fe1.Spec.ClusterConfig.ClusterName = "beta"
			return fe1
		}},
		{"fe1 deleted since the cache saw it", func(*v2alpha1.Frontend) client.Object { return nil }},
	} {
		t.Run(c.name, func(t *testing.T) {
			tenant := settledBackendTenant(corev1.ConditionFalse, corev1.ConditionFalse)
			cache := indexed(fake.NewClientBuilder()).WithObjects(tenant...).Build()
			var objects []client.Object
			for _, o := range cloned(tenant) {
				if fe1, ok := o.(*v2alpha1.Frontend); ok {
					if o = c.fresh(fe1); o == nil {
						continue
					}
				}
				objects = append(objects, o)
			}
			fresh := indexed(fake.NewClientBuilder()).WithObjects(objects...).Build()

			ok, why, err := sequencer.MayStartByName(context.Background(), cache, fresh, "tenant", "acme-fe1", "", defaults.Builtin(), time.Now(), rollout.Grouping{})
			require.NoError(t, err)
			assert.False(t, ok)
			assert.Equal(t, rollout.FallbackCache, why.Label, "not held on the read by name: %s", why.Why)
		})
	}
}

// settledBackendTenant is tenant acme: a Backend whose two pods run on
// machine-1, Ready as be0 and be1 say, and fe1. Its objects are, in order,
// the Backend, fe1, the Backend's StatefulSet, be-0, be-1 and the machine.
func settledBackendTenant(be0, be1 corev1.ConditionStatus) []client.Object {
	be := &v2alpha1.Backend{ObjectMeta: metav1.ObjectMeta{Name: "acme-be", Namespace: "tenant"}}
	be.Spec.ClusterConfig.ClusterName = "acme"
	fe1 := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Namespace: "tenant"}}
	fe1.Spec.ClusterConfig.ClusterName = "acme"
	set := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "acme-be", Namespace: "tenant", UID: "set-uid"},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v2alpha1.LabelNode: "acme-be"}},
		}},
		Status: appsv1.StatefulSetStatus{Replicas: 2},
	}
	pod := func(name string, ready corev1.ConditionStatus) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant", UID: types.UID("uid-" + name),
				Labels: map[string]string{v2alpha1.LabelNode: "acme-be"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "acme-be",
					UID: "set-uid", Controller: ptr.To(true)}}},
			Spec:   corev1.PodSpec{NodeName: "machine-1"},
			Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
		}
	}
	machine := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "machine-1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	return []client.Object{be, fe1, set, pod("acme-be-0", be0), pod("acme-be-1", be1), machine}
}

// indexed adds the cache's field indexes to b.
func indexed(b *fake.ClientBuilder) *fake.ClientBuilder {
	byTenant := func(o client.Object) []string {
		return []string{o.(v2alpha1.Node).NodeSpec().ClusterConfig.ClusterName}
	}
	return b.WithScheme(scheme.New()).
		WithIndex(&v2alpha1.Backend{}, sequencer.IndexTenant, byTenant).
		WithIndex(&v2alpha1.Frontend{}, sequencer.IndexTenant, byTenant).
		WithIndex(&corev1.Pod{}, sequencer.IndexPodNode, func(o client.Object) []string { return []string{o.GetLabels()[v2alpha1.LabelNode]} })
}

// cloned deep-copies objects, for a client of its own.
func cloned(objects []client.Object) []client.Object {
	out := make([]client.Object, len(objects))
	for i, o := range objects {
		out[i] = o.DeepCopyObject().(client.Object)
	}
	return out
}

// setReady sets the Ready condition of pod name, in namespace tenant, to
// status.
func setReady(ctx context.Context, c client.Client, name string, status corev1.ConditionStatus) error {
	return podReady(ctx, c, "tenant", name, status)
}

// podReady sets the Ready condition of pod name in ns to status.
func podReady(ctx context.Context, c client.Client, ns, name string, status corev1.ConditionStatus) error {
	var p corev1.Pod
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &p); err != nil {
		return err
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
	return c.Status().Update(ctx, &p)
}

// touchMachine writes machine name's heartbeat, a minute after the last,
// Ready as ready says: a write, even where the status stays.
func touchMachine(ctx context.Context, c client.Client, name string, ready corev1.ConditionStatus) error {
	var m corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &m); err != nil {
		return err
	}
	m.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(m.Status.Conditions[0].LastHeartbeatTime.Add(time.Minute))
	m.Status.Conditions[0].Status = ready
	return c.Status().Update(ctx, &m)
}
