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

// renderTo applies, node by node gap ticks apart, a render of rollout-id id
// at version that lists the nodes rendered: each node of keys takes the
// version, the id and the list in one write, and is brought up.
func renderTo(w *world, id, version string, rendered []string, gap int, keys ...string) {
	for _, k := range keys {
		w.update(k, func(n v2alpha1.Node) {
			n.NodeSpec().ExpressVersion = version
			n.NodeSpec().Up = nil
			w.renderOf(n, id, rendered)
		})
		ticks(gap)(w)
	}
}

// A render that also creates fe3 (back in the values) creates it last, long
// after the other nodes took it: fe3 is listed, so the change still lands
// until it exists, and fe4 goes after it, as if applied at once. Counted
// only once it existed, fe4 rolled before it.
func TestANodeTheRenderCreatesLastKeepsItsTurn(t *testing.T) {
	w, old := renderedWithoutFe3(t)
	mark := len(w.started)
	all := keysOf(5)
	renderTo(w, "r2", v2, all, 0, old...)
	ticks(30)(w)
	w.create("fe3", v2, nil)
	renderTo(w, "r2", v2, all, 0, "fe3")
	w.run(400)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", w.startedSince(mark))
}

// fe3 is down and carries no rollout-id (created before the chart stamped
// one); the first render with an id changes every node and brings fe3 back
// up, fe3 last, long after the others: listed, it lacks the id, and the
// change rolls as if applied at once.
func TestANodeDownWithoutAnIdThatTheRenderBringsUpLastKeepsItsTurn(t *testing.T) {
	w := newWorld(t, "acme")
	for _, k := range keysOf(5) {
		w.create(k, v1, func(s *v2alpha1.NodeSpec) {
			if k == "fe3" {
				s.Up = ptr.To(false)
			}
		})
	}
	w.run(400)
	mark := len(w.started)
	renderTo(w, "r1", v2, keysOf(5), 30, "fe1", "fe2", "be", "fe4")
	ticks(30)(w)
	assert.Empty(t, w.startedSince(mark), "nothing rolls before fe3 has the render")
	renderTo(w, "r1", v2, keysOf(5), 0, "fe3")
	w.run(400)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", w.startedSince(mark))
}

// fe1 is deleted while a render that no longer renders fe2 is applied to
// it first (an Argo CD sync running as someone deletes fe1). Once fe1 is
// gone, no node carries the render's rollout-id: nothing in the tenant
// shows it, and fe2, gated for a change of its own, goes by what the
// tenant shows — fe1 gone, nothing to wait for. The render's change begins
// where it next lands, at be, with fe1 created again: as if applied then.
// The world's oracle took the render for a change landing still and
// disputed fe2's release.
func TestARenderThatLandedOnlyOnANodeDeletedSinceIsNoChangeLanding(t *testing.T) {
	w := newWorld(t, "acme")
	all := keysOf(3)
	for _, k := range all {
		w.create(k, v1, nil)
	}
	w.setRolloutID("r1", all...) // a chart that does not say which nodes it renders
	w.run(400)
	w.setVersion(v2, all...) // a kubectl edit of every node, no new rollout-id
	fe1, fe2 := w.name("fe1"), w.name("fe2")
	for i := 0; i < 200 && !(w.snapshot().isReady(fe1) && ReleasedTarget(w.nodes[fe1]) == StampedTarget(w.nodes[fe1])); i++ {
		w.step()
	}
	require.True(t, Gated(w.nodes[fe2]), "fe2 waits for fe1")
	w.remove("fe1")
	renderTo(w, "r2", v2, []string{"be", "fe1"}, 0, "fe1")
	for i := 0; i < 3 && w.nodes[fe1] != nil; i++ {
		w.operate() // the operator finishes deleting fe1 before the sequencer looks
	}
	require.Nil(t, w.nodes[fe1])
	for i := 0; i < 200 && Gated(w.nodes[fe2]); i++ {
		w.step()
	}
	require.False(t, Gated(w.nodes[fe2]), "fe2 still gated: %s", w.condition("fe2").Message)
	assert.Nil(t, w.nodes[fe1], "fe2 went with fe1 gone")
	renderTo(w, "r2", v2, []string{"be", "fe1"}, 0, "be")
	w.create("fe1", v1, nil)
	renderTo(w, "r2", v2, []string{"be", "fe1"}, 0, "fe1")
	w.run(400)
}

// An Argo CD sync of a render that brings fe3 back into the values applies
// it first to fe1, which someone is deleting. fe1 takes no part in the
// order, but the render has begun to land: it creates fe3, which fe4 goes
// after, as if applied at once. Read only from the nodes not being
// deleted, the tenant agreed on the old render, and fe4, changed by a
// kubectl edit, went before fe3 existed.
func TestARenderThatReachedANodeBeingDeletedFirstIsLanding(t *testing.T) {
	w, old := renderedWithoutFe3(t)
	w.setVersion(v2, old...)
	be, fe4 := w.name("be"), w.name("fe4")
	for i := 0; i < 200 && !(w.snapshot().isReady(be) && w.lastHash[be] == StampedTarget(w.nodes[be])); i++ {
		w.step()
	}
	require.True(t, Gated(w.nodes[fe4]), "fe4 waits for be")
	w.remove("fe1")
	renderTo(w, "r2", v2, keysOf(5), 0, "fe1")
	w.step()
	require.True(t, Gated(w.nodes[fe4]), "fe4 went before fe3, which the render creates, existed")
	mark := len(w.started)
	renderTo(w, "r2", v2, keysOf(5), 0, "be", "fe2", "fe4")
	w.create("fe3", v1, nil)
	renderTo(w, "r2", v2, keysOf(5), 0, "fe3")
	for i := 0; i < 50 && w.nodes[w.name("fe1")] != nil; i++ {
		w.step()
	}
	w.create("fe1", v1, nil) // the sync creates it again once it is gone
	renderTo(w, "r2", v2, keysOf(5), 0, "fe1")
	w.run(400)
	assert.Contains(t, w.startedSince(mark), "fe3 fe4")
}

// renderedWithoutFe3 settles a tenant of be, fe1, fe2 and fe4 (fe3 out of
// the values) on render r1, which says which nodes it renders.
func renderedWithoutFe3(t *testing.T) (*world, []string) {
	w := newWorld(t, "acme")
	old := []string{"be", "fe1", "fe2", "fe4"}
	for _, k := range old {
		w.create(k, v1, nil)
	}
	renderTo(w, "r1", v1, old, 0, old...)
	w.run(400)
	return w, old
}
