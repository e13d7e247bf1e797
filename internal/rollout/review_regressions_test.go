package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A Backend rolled last (nothing records its convergence), taken down by
// an operator that deletes its StatefulSet, its frontends not Ready without
// it, and brought back up with the target it ran: nothing shows what it
// ran, and it comes back by the provisioning order (DESIGN §4, recovery) —
// first. Read as an upgrade, it waited for frontends that wait for it.
func TestABackendBroughtBackUpWithNothingLeftOfItComesBackFirst(t *testing.T) {
	w := newWorld(t, "acme")
	w.oracle = nil
	settledTenant(w, 4)
	w.setVersion("v2", "be")
	w.run(200)
	be := w.name("be")
	w.update("be", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
	for range 3 {
		w.step()
	}
	delete(w.lastHash, be) // the operator deleted be's StatefulSet
	delete(w.scaledDown, be)
	for _, k := range []string{"fe1", "fe2", "fe3"} {
		for i := range w.pods[w.name(k)] {
			w.pods[w.name(k)][i].Conditions["Ready"] = "False" // no backend: readiness fails
		}
	}
	w.update("be", func(n v2alpha1.Node) { n.NodeSpec().Up = nil })
	require.True(t, Gated(w.nodes[be]))
	assert.Equal(t, ModeProvisioning, w.snapshot().mode(be))
	for i := 0; i < 100 && Gated(w.nodes[be]); i++ {
		w.step()
	}
	assert.False(t, Gated(w.nodes[be]), "be still gated: %s", w.condition("be").Message)
}

// be deleted with --cascade=orphan (its StatefulSet loses its owner
// reference) and created again; the operator adopts the StatefulSet
// (controller reference to the new UID), whose pods run on. The fresh read
// follows pod → StatefulSet → the new be and counts them; the cache, which
// holds no StatefulSets, counts them too: judged by their creation time it
// dropped them, be was never Ready on the cache, and a frontends-only
// change whose cached plan released nothing never read fresh.
func TestPodsOfAStatefulSetAdoptedByANodeCreatedAgainCountOnTheCacheAsOnTheFreshRead(t *testing.T) {
	w := newWorld(t, "acme")
	settledTenant(w, 3)
	be := w.name("be")
	oldBe, oldPods, hash := w.nodes[be], w.pods[be], w.lastHash[be]
	for range 30 {
		w.step()
	}
	w.recreate("be")
	delete(w.gone, be)
	w.pods[be] = oldPods
	adopted := w.statefulSetOf(oldBe, hash)
	adopted.OwnerReferences = []metav1.OwnerReference{{APIVersion: v2alpha1.GroupVersion.String(), Kind: v2alpha1.KindBackend, Name: be, UID: w.nodes[be].GetUID(), Controller: ptr.To(true)}}
	fresh := CurrentPods(w.pods, w.nodes, []appsv1.StatefulSet{adopted})
	cached := CurrentPods(w.pods, w.nodes, nil)
	require.Len(t, fresh[be], len(oldPods), "the fresh read counts the adopted StatefulSet's pods")
	assert.Len(t, cached[be], len(oldPods), "so does the cache")

	orphan := w.statefulSetOf(oldBe, hash)
	orphan.OwnerReferences = nil
	assert.Empty(t, CurrentPods(w.pods, w.nodes, []appsv1.StatefulSet{orphan})[be], "an orphan made before the node is not its workload")
}
