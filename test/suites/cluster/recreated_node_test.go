package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// keepFinalizer is another controller's finalizer on a StatefulSet (a
// backup tool's, say): it keeps the StatefulSet, and so its pods, after the
// garbage collector has deleted it, until that controller lets go.
const keepFinalizer = "example.com/keep"

// A node deleted and created again with the same spec while a change to all
// rolls (kubectl replace --force, Argo CD Replace=true,Force=true, helm
// uninstall && helm install) is another object. Its old StatefulSet and
// pods — same node label, same target hash, Ready — belong to the deleted
// one until the garbage collector removes them (held here by another
// controller's finalizer), and its pod on the new target, starting when fe2
// was deleted, becomes Ready. The new fe2's first rollout is judged on its
// own pods: be waits until they are Ready, however long the old ones linger.
func TestANodeCreatedAgainOverItsOldWorkloadRollsBeforeTheBackendOnItsOwnPods(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := namespace(t)
	replicas.set(ns, 1)
	readyAfter.set(ns, slowReady)
	createNodes(t, ns, 4)
	waitSettled(t, ns)
	log := watchOrder(ctx, t, ns)
	mark := time.Now()
	// be is paused until the new fe2 exists: while no fe2 exists, be's
	// order has no fe2 in it (DESIGN §3: an absent frontend leaves the
	// order), and its release then is not what this test is about.
	update(t, ns, withAnnotation(v2alpha1.AnnotationPauseRollout, "true"), "be")
	setVersion(t, ns, v2, keys(4)...)
	old := waitReleased(t, ns, "fe2")
	// fe2's pod on v2 is bound and starting: Ready slowReady later, whatever
	// happens to its StatefulSet meanwhile.
	require.True(t, waitFor(time.Minute, func() bool { return firstStartOn(pods.Since(ns, mark), "acme-fe2", v2, mark) != (time.Time{}) }), "fe2's pod on v2 starts")

	sts := &appsv1.StatefulSet{}
	sts.Namespace, sts.Name = ns, "acme-fe2"
	require.NoError(t, harness.Client.Patch(ctx, sts, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+keepFinalizer+`"]}}`))))
	released := false
	release := func() {
		if released {
			return
		}
		released = true
		require.Eventually(t, func() bool {
			if err := harness.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts); err != nil {
				return apierrors.IsNotFound(err)
			}
			sts.Finalizers = slices.DeleteFunc(sts.Finalizers, func(f string) bool { return f == keepFinalizer })
			return harness.Client.Update(ctx, sts) == nil
		}, 10*time.Second, 50*time.Millisecond)
	}
	defer release()

	require.NoError(t, harness.Client.Delete(ctx, old, client.PropagationPolicy("Background")))
	require.Eventually(t, func() bool {
		return apierrors.IsNotFound(harness.Client.Get(ctx, client.ObjectKeyFromObject(old), node(ns, "fe2")))
	}, 10*time.Second, 20*time.Millisecond, "fe2 deleted")
	// The garbage collector has deleted the old StatefulSet (the finalizer
	// keeps it, and its pods, for now): no operator adopts it then.
	require.Eventually(t, func() bool {
		return harness.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts) == nil && sts.DeletionTimestamp != nil
	}, 30*time.Second, 20*time.Millisecond, "the garbage collector deletes fe2's StatefulSet")
	again := node(ns, "fe2")
	*again.NodeSpec() = v2alpha1.NodeSpec{ClusterConfig: old.NodeSpec().ClusterConfig, ExpressVersion: v2}
	require.NoError(t, harness.Client.Create(ctx, again))
	require.NotEqual(t, old.GetUID(), again.GetUID())

	// The new fe2 is released for its first rollout; the old pods, Ready
	// on the same target, do not make it Ready.
	waitReleased(t, ns, "fe2")
	update(t, ns, withAnnotation(v2alpha1.AnnotationPauseRollout, ""), "be")
	time.Sleep(2 * slowReady) // the old pod becomes Ready on the target meanwhile: a release of be on it would come now
	be := node(ns, "be")
	require.NoError(t, harness.Client.Get(ctx, client.ObjectKeyFromObject(be), be))
	assert.True(t, be.NodeSpec().HasGate(v2alpha1.GateSequencer), "be waits for the new fe2's own pods; starts: %s", starts(ns, mark))

	release()
	waitSettled(t, ns)
	t.Logf("starts: %s", starts(ns, mark))
	checkOrder(t, log.snapshot(), mark, 1)
}
