package sequencer_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// The whole tenant's fresh read is four lists, each at its own moment. Made
// one moment, a change between them cannot be read half: here fe2 is
// brought back up (live, no pod yet) and the Backend's pod turns Ready
// after the Frontends were listed and before the pods were. Read half —
// fe2 down, the Backend Ready — fe3's new pod would start, though at no
// moment were all its live predecessors Ready: before the change the
// Backend was not, after it fe2 is not. Read at one revision — the
// Frontends', before the change — it is held for the Backend.
func TestTheWholeTenantsReadIsOneMoment(t *testing.T) {
	h := apiServer.Get(t)
	ctx := context.Background()
	ns := threeFrontendTenant(t, h.Client)
	setPodReady(t, h.Client, ns, "acme-be-0", corev1.ConditionTrue)
	snap, err := sequencer.GatherFreshFor(ctx, h.Client, ns, "acme-fe3", "", defaults.Builtin(), time.Now(), rollout.Grouping{})
	require.NoError(t, err)
	ok, why := rollout.PodsMayStart(snap, "acme-fe3")
	require.True(t, ok, "with the Backend and fe1 Ready and fe2 down, fe3's pods start: %s", why)
	setPodReady(t, h.Client, ns, "acme-be-0", corev1.ConditionFalse)

	var once sync.Once
	changed := make(chan struct{})
	watching, err := client.NewWithWatch(h.Config, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	between := interceptor.NewClient(watching, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			switch list.(type) {
			case *corev1.PodList:
				if !awaitClosed(t, changed, "the Frontends listed and the tenant changed") {
					return context.DeadlineExceeded
				}
			case *v2alpha1.FrontendList:
				err := c.List(ctx, list, opts...)
				once.Do(func() {
					defer close(changed)
					var fe2 v2alpha1.Frontend
					if !assert.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-fe2"}, &fe2)) {
						return
					}
					fe2.Spec.Up = ptr.To(true)
					assert.NoError(t, c.Update(ctx, &fe2))
					setPodReady(t, c, ns, "acme-be-0", corev1.ConditionTrue)
				})
				return err
			}
			return c.List(ctx, list, opts...)
		},
	})

	snap, err = sequencer.GatherFreshFor(ctx, between, ns, "acme-fe3", "", defaults.Builtin(), time.Now(), rollout.Grouping{})
	require.NoError(t, err)
	ok, why = rollout.PodsMayStart(snap, "acme-fe3")
	assert.False(t, ok, "read as it was before the change, fe3's new pod waits")
	assert.Contains(t, why, "acme-be", "for the Backend, not Ready then")
}

// threeFrontendTenant creates, in a namespace of its own, tenant acme: be
// and fe1 with a one-pod StatefulSet each (be's pod not Ready, fe1's
// Ready), fe2 down with none, and fe3. It returns the namespace.
func threeFrontendTenant(t *testing.T, c client.Client) string {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "one-moment-"}}
	require.NoError(t, c.Create(ctx, ns))
	for _, n := range []v2alpha1.Node{
		&v2alpha1.Backend{ObjectMeta: metav1.ObjectMeta{Name: "acme-be", Namespace: ns.Name}},
		&v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Namespace: ns.Name}},
		&v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe2", Namespace: ns.Name}},
		&v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe3", Namespace: ns.Name}},
	} {
		n.NodeSpec().ClusterConfig.ClusterName = "acme"
		n.NodeSpec().ExpressVersion = "express-e689.151"
		if n.GetName() == "acme-fe2" {
			n.NodeSpec().Up = ptr.To(false)
		}
		require.NoError(t, c.Create(ctx, n))
	}
	for node, ready := range map[string]corev1.ConditionStatus{"acme-be": corev1.ConditionFalse, "acme-fe1": corev1.ConditionTrue} {
		labels := map[string]string{v2alpha1.LabelNode: node}
		spec := corev1.PodSpec{Containers: []corev1.Container{{Name: "express", Image: "express"}}}
		set := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: node, Namespace: ns.Name},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec}},
		}
		require.NoError(t, c.Create(ctx, set))
		// Its status as the StatefulSet controller, which does not run
		// here, writes it once it has made the pod.
		set.Status = appsv1.StatefulSetStatus{ObservedGeneration: set.Generation, Replicas: 1}
		require.NoError(t, c.Status().Update(ctx, set))
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: node + "-0", Namespace: ns.Name, Labels: labels,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: node, UID: set.UID, Controller: ptr.To(true)}}},
			Spec: spec,
		}
		require.NoError(t, c.Create(ctx, pod))
		setPodReady(t, c, ns.Name, pod.Name, ready)
	}
	return ns.Name
}

// setPodReady sets pod name's Ready condition in ns to status.
func setPodReady(t *testing.T, c client.Client, ns, name string, status corev1.ConditionStatus) {
	t.Helper()
	require.NoError(t, podReady(context.Background(), c, ns, name, status))
}

// roundTrip is an http.RoundTripper of a function.
type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// The same, through the reader the sequencer reads fresh with
// (FreshReader), which lists Backends and Frontends with a REST client of
// its own: the change comes once the Frontends were listed, before the
// pods are.
func TestTheWholeTenantsReadIsOneMomentThroughTheFreshReader(t *testing.T) {
	h := apiServer.Get(t)
	ctx := context.Background()
	ns := threeFrontendTenant(t, h.Client)
	listed := make(chan struct{})
	var once, changed sync.Once
	cfg := rest.CopyConfig(h.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTrip(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if err == nil && r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/frontends") {
				once.Do(func() { close(listed) })
			}
			return resp, err
		})
	})
	watching, err := client.NewWithWatch(h.Config, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	between := interceptor.NewClient(watching, interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*corev1.PodList); ok {
				changed.Do(func() {
					if !awaitClosed(t, listed, "the fresh reader's list of Frontends") {
						return
					}
					var fe2 v2alpha1.Frontend
					if assert.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-fe2"}, &fe2)) {
						fe2.Spec.Up = ptr.To(true)
						assert.NoError(t, c.Update(ctx, &fe2))
					}
					assert.NoError(t, podReady(ctx, c, ns, "acme-be-0", corev1.ConditionTrue))
				})
			}
			return c.List(ctx, list, opts...)
		},
	})
	fresh, err := sequencer.FreshReader(cfg, between)
	require.NoError(t, err)

	snap, err := sequencer.GatherFreshFor(ctx, fresh, ns, "acme-fe3", "", defaults.Builtin(), time.Now(), rollout.Grouping{})
	require.NoError(t, err)
	ok, why := rollout.PodsMayStart(snap, "acme-fe3")
	assert.False(t, ok, "read at one revision, fe3's pod waits")
	assert.Contains(t, why, "acme-be", "for the Backend, not Ready then")
}
