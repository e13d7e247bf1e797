package integration

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// laggingCache reads from a copy of the cluster taken when the test says,
// and writes to the real API server: a cache whose Backend informer has not
// delivered the sequencer's own last write yet, while its Frontend informer
// has moved on. (Separate informers deliver separate kinds in no common
// order.) The copy is the only stand-in here: every write, and the
// webhooks, are the real API server's.
type laggingCache struct {
	client.Client
	reads client.Reader
}

func (c laggingCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reads.Get(ctx, key, obj, opts...)
}

func (c laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.reads.List(ctx, list, opts...)
}

// copyOf builds the cache's view from objects read from the API server,
// with the sequencer's field indexes. The sequencer's cache holds no
// StatefulSets: read through this view, as a stale replica's fresh reads
// are, they are refused as unreadable (a replica without the RBAC to read
// them), not found to be none — which would make every pod of one an
// orphan of a StatefulSet gone, and no node Ready.
func copyOf(t *testing.T, objs ...client.Object) client.Reader {
	t.Helper()
	byTenant := func(o client.Object) []string {
		return []string{o.(v2alpha1.Node).NodeSpec().ClusterConfig.ClusterName}
	}
	unreadable := apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "statefulsets"}, "", errors.New("the cache holds no StatefulSets"))
	return fake.NewClientBuilder().WithScheme(harness.Client.Scheme()).WithObjects(objs...).
		WithIndex(&v2alpha1.Backend{}, sequencer.IndexTenant, byTenant).
		WithIndex(&v2alpha1.Frontend{}, sequencer.IndexTenant, byTenant).
		WithIndex(&corev1.Pod{}, sequencer.IndexPodNode, func(o client.Object) []string { return []string{o.GetLabels()[v2alpha1.LabelNode]} }).
		WithInterceptorFuncs(interceptor.Funcs{
			Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*appsv1.StatefulSet); ok {
					return unreadable
				}
				return c.Get(ctx, key, obj, opts...)
			},
			List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*appsv1.StatefulSetList); ok {
					return unreadable
				}
				return c.List(ctx, list, opts...)
			},
		}).
		Build()
}

func read(t *testing.T, ns, k string) v2alpha1.Node {
	t.Helper()
	n := node(ns, k)
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n))
	return n
}

func podsOf(t *testing.T, ns string) []client.Object {
	t.Helper()
	var pods corev1.PodList
	require.NoError(t, harness.Client.List(context.Background(), &pods, client.InNamespace(ns)))
	var out []client.Object
	for i := range pods.Items {
		out = append(out, &pods.Items[i])
	}
	return out
}

// The backend's change is released; the frontend then changes too. A cache
// that has seen the frontend's change but not the backend's release shows
// the backend gated on its old, Ready pods — Ready, for a frontend that
// waits for it by the provisioning order. The sequencer plans on the cache
// with its own writes laid over it: the backend is in its rollout, Ready for
// no one, and the frontend stays gated.
func TestAReleaseTheCacheHasNotSeenYetStillHoldsItsDependents(t *testing.T) {
	stop := startSequencer(t)
	ns, _ := settledTenant(t, 2)
	stop()
	ctx := context.Background()
	tenant := rollout.Tenant{Namespace: ns, ClusterName: "acme"}

	setVersion(t, ns, v2, "be")
	beBefore, pods := read(t, ns, "be"), podsOf(t, ns)
	require.True(t, v2alpha1.IsGated(beBefore), "the webhook gates the backend's change")
	cache := &laggingCache{Client: harness.Client}
	cache.reads = copyOf(t, append(pods, beBefore, read(t, ns, "fe1"))...)
	r := newLaggingReconciler(cache)
	pastSettle()
	_, err := r.Reconcile(ctx, tenant)
	require.NoError(t, err)
	require.False(t, v2alpha1.IsGated(read(t, ns, "be")), "the backend's change is released: fe1 is on its target")

	setVersion(t, ns, v2, "fe1")
	cache.reads = copyOf(t, append(pods, beBefore, read(t, ns, "fe1"))...) // the Backend informer still lags
	pastSettle()
	_, err = r.Reconcile(ctx, tenant)
	require.NoError(t, err)
	fe1 := read(t, ns, "fe1")
	assert.True(t, v2alpha1.IsGated(fe1), "fe1 waits for the backend's rollout, whatever the cache says")
	if c := condition(fe1); assert.NotNil(t, c) {
		assert.Contains(t, c.Message, "acme-be", "the wait names the backend")
	}
}

// settledWithDown is a tenant of size nodes, settled with node down
// (`up: false`) and the sequencer stopped; it returns the namespace and the
// down node as it then is.
func settledWithDown(t *testing.T, size int, down string) (string, v2alpha1.Node) {
	stop := startSequencer(t)
	ns := namespace(t)
	createTenant(t, ns, size, func(k string, s *v2alpha1.NodeSpec) {
		if k == down {
			s.Up = ptr.To(false)
		}
	})
	waitSettled(t, ns, size)
	stop()
	return ns, read(t, ns, down)
}

// newLaggingReconciler is a sequencer whose cache is c, reading fresh from
// the API server before a release.
func newLaggingReconciler(c *laggingCache) *sequencer.Reconciler {
	return &sequencer.Reconciler{
		Client: c, Fresh: harness.Client, Orders: defaults.Builtin(), Clock: clock.RealClock{}, Grouping: grouping,
		Recorder: events.NewFakeRecorder(100),
	}
}

// fe2 is brought back up (the webhook gates it) as fe3's pods are lost and
// recreated: the pod webhook, reading fresh, holds them — fe2 is live and
// not Ready. A cache whose Frontend informer has not delivered fe2's change
// still shows it down, and fe3's pods free to start; no write of the
// sequencer is involved. The pass that would release them is planned again
// from fresh reads: they stay held. A replica that plans on the cache alone
// tries to release them, and the API server's release guard refuses it.
func TestAUserChangeTheCacheHasNotSeenStillHoldsRecoveringPods(t *testing.T) {
	ns, fe2Down := settledWithDown(t, 4, "fe2")
	setUp(t, ns, true, "fe2")
	evict(t, ns, "fe3")
	held := func() string {
		for _, p := range podsOf(t, ns) {
			pod := p.(*corev1.Pod)
			if pod.Labels[v2alpha1.LabelNode] == "acme-fe3" && len(pod.Spec.SchedulingGates) > 0 {
				return pod.Name
			}
		}
		return ""
	}
	require.True(t, waitFor(10*time.Second, func() bool { return held() != "" }),
		"the pod webhook holds fe3's new pod, its StatefulSet's: fe2 is live and not Ready")

	cache := &laggingCache{Client: harness.Client}
	cache.reads = copyOf(t, append(append(podsOf(t, ns), machines(t)...), read(t, ns, "be"), read(t, ns, "fe1"), fe2Down, read(t, ns, "fe3"))...)
	pastSettle()
	_, err := newLaggingReconciler(cache).Reconcile(context.Background(), rollout.Tenant{Namespace: ns, ClusterName: "acme"})
	require.NoError(t, err)
	assert.NotEmpty(t, held(), "fe3's pods wait for fe2, whatever the cache says")
	assert.False(t, v2alpha1.IsGated(read(t, ns, "fe2")), "fe2, whose turn it is, is released")

	_, err = staleReplica(cache).Reconcile(context.Background(), rollout.Tenant{Namespace: ns, ClusterName: "acme"})
	require.Error(t, err, "from the cache alone, fe3's pods are released")
	assert.Contains(t, err.Error(), "of acme-fe3 does not stand on the tenant as it is now: waiting for acme-fe2", "the release guard names the wait")
	assert.NotEmpty(t, held(), "the stale release is refused")
}

// The backend crashes (and stays down) as the frontend gets a change. A
// cache whose pod informer has not delivered the crash shows the backend
// Ready, and the frontend free to go; the pass that would release it is
// planned again from fresh reads: the backend recovers first.
func TestACrashTheCacheHasNotSeenStillHoldsTheNextNode(t *testing.T) {
	ns, before := crashedBackendWithAChange(t)
	cache := &laggingCache{Client: harness.Client}
	cache.reads = copyOf(t, append(before, read(t, ns, "be"), read(t, ns, "fe1"))...)
	pastSettle()
	_, err := newLaggingReconciler(cache).Reconcile(context.Background(), rollout.Tenant{Namespace: ns, ClusterName: "acme"})
	require.NoError(t, err)
	waitsForTheCrashedBackend(t, ns)
}

// crashedBackendWithAChange is a settled two-node tenant, the sequencer
// stopped, whose backend has crashed as fe1 gets a change; it returns the
// namespace and its pods as they were before the crash (a cache that has
// not seen it).
func crashedBackendWithAChange(t *testing.T) (string, []client.Object) {
	t.Helper()
	stop := startSequencer(t)
	ns, _ := settledTenant(t, 2)
	stop()
	before := podsOf(t, ns)
	crash(t, ns, "be")
	t.Cleanup(func() { mend(t, ns) })
	setVersion(t, ns, v2, "fe1")
	return ns, before
}

// waitsForTheCrashedBackend asserts that fe1 of ns is still gated, its
// condition naming the backend.
func waitsForTheCrashedBackend(t *testing.T, ns string) {
	t.Helper()
	fe1 := read(t, ns, "fe1")
	assert.True(t, v2alpha1.IsGated(fe1), "fe1 waits for the crashed backend, whatever the cache says")
	if c := condition(fe1); assert.NotNil(t, c) {
		assert.Contains(t, c.Message, "acme-be")
	}
}

// The backend is brought back up (the webhook gates it) as fe1 gets a
// change. A cache whose Backend informer has not delivered the backend's
// change still shows it down, and fe1 free to go; the pass that would
// release it is planned again from fresh reads — the Backends listed — and
// fe1 waits for the backend it needs.
func TestABackendChangeTheCacheHasNotSeenStillHoldsTheFrontends(t *testing.T) {
	ns, beDown := settledWithDown(t, 2, "be")
	setUp(t, ns, true, "be")
	setVersion(t, ns, v2, "fe1")

	cache := &laggingCache{Client: harness.Client}
	cache.reads = copyOf(t, append(podsOf(t, ns), beDown, read(t, ns, "fe1"))...)
	pastSettle()
	_, err := newLaggingReconciler(cache).Reconcile(context.Background(), rollout.Tenant{Namespace: ns, ClusterName: "acme"})
	require.NoError(t, err)
	fe1 := read(t, ns, "fe1")
	assert.True(t, v2alpha1.IsGated(fe1), "fe1 waits for the backend brought back up, whatever the cache says")
	if c := condition(fe1); assert.NotNil(t, c) {
		assert.Contains(t, c.Message, "acme-be", "the wait names the backend")
	}
}
