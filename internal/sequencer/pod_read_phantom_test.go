package sequencer_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// A node absent at both reads of its name may have been there in between.
// Tenant acme has be, its pod not Ready, and fe2, and no fe1; a new pod of
// fe2 is read by name. After fe1's read (absent) fe1 is created and be's
// pod turns Ready; be's pod is read Ready, twice; then it crashes and fe1
// is deleted. Every GET read again finds what it found, and fe1 is gone
// again, yet at no moment were fe2's live predecessors all Ready: before
// fe1 came, be was not; while fe1 was there, fe1 was not. The Backends and
// Frontends listed at one revision between the two reads show fe1: the pod
// is not let start on the read by name.
func TestANodeThatCameAndWentBetweenTwoReadsOfItsNameHoldsThePod(t *testing.T) {
	h := apiServer.Get(t)
	ctx := context.Background()
	ns := threeFrontendTenant(t, h.Client)
	for _, name := range []string{"acme-fe1", "acme-fe3"} { // be and fe2 only
		require.NoError(t, h.Client.Delete(ctx, &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}))
	}
	var fe2 v2alpha1.Frontend
	require.NoError(t, h.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-fe2"}, &fe2))
	fe2.Spec.Up = nil
	require.NoError(t, h.Client.Update(ctx, &fe2))
	var be v2alpha1.Backend
	require.NoError(t, h.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-be"}, &be))
	var bePod corev1.Pod
	require.NoError(t, h.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-be-0"}, &bePod))
	cache := indexed(fake.NewClientBuilder()).WithObjects(&be, &fe2, &bePod).Build()

	fe1 := func() *v2alpha1.Frontend {
		n := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Namespace: ns}}
		n.Spec.ClusterConfig.ClusterName = "acme"
		n.Spec.ExpressVersion = "express-e689.151"
		return n
	}
	var fe1Reads, be0Reads atomic.Int32
	fe1Came := make(chan struct{})
	watching, err := client.NewWithWatch(h.Config, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	fresh := interceptor.NewClient(watching, interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			_, frontend := obj.(*v2alpha1.Frontend)
			_, pod := obj.(*corev1.Pod)
			switch {
			case frontend && key.Name == "acme-fe1":
				if fe1Reads.Add(1) == 1 {
					err := c.Get(ctx, key, obj, opts...)
					defer close(fe1Came)
					assert.NoError(t, c.Create(ctx, fe1()))
					assert.NoError(t, podReady(ctx, c, ns, "acme-be-0", corev1.ConditionTrue))
					return err
				}
			case pod && key.Name == "acme-be-0":
				if be0Reads.Add(1) == 1 {
					<-fe1Came
					break
				}
				err := c.Get(ctx, key, obj, opts...)
				assert.NoError(t, podReady(ctx, c, ns, "acme-be-0", corev1.ConditionFalse))
				assert.NoError(t, c.Delete(ctx, fe1()))
				return err
			}
			return c.Get(ctx, key, obj, opts...)
		},
	})

	ok, why, err := sequencer.MayStartByName(ctx, cache, fresh, ns, "acme-fe2", "", defaults.Builtin(), time.Now(), rollout.Grouping{})
	require.NoError(t, err)
	require.Equal(t, int32(1), fe1Reads.Load(), "fe1's name is read by a GET once, absent; nodes are read again only through their list")
	assert.False(t, ok, "fe2's pod is not let start on the read by name")
	assert.Equal(t, rollout.FallbackMoved, why.Label, why.Why)
	assert.Contains(t, why.Why, "acme-fe1", "fe1, there between the reads, is named")
}
