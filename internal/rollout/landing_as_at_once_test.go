package rollout

// A change applied node by node lands as if applied at once (DESIGN §4),
// also where a node crashed or came back up gated for it: no node goes
// ahead of the landing before every node that could come before it has
// landed — a render may bring a down node back up before it, or give
// another node lists that no longer need it.

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// renderLists renders rollout-id id on v2 to node key with explicit lists.
func renderLists(id, key string, prov, upg []string) step {
	return func(w *world) {
		w.update(key, func(n v2alpha1.Node) {
			n.NodeSpec().ExpressVersion = v2
			setAnnotation(n, v2alpha1.AnnotationRolloutID, id)
			explicitLists(w, prov, upg)(n.NodeSpec())
		})
	}
}

// renderEdit renders rollout-id id to node key with an edit of its spec.
func renderEdit(id, key string, edit func(*v2alpha1.NodeSpec)) step {
	return func(w *world) {
		w.update(key, func(n v2alpha1.Node) {
			setAnnotation(n, v2alpha1.AnnotationRolloutID, id)
			edit(n.NodeSpec())
		})
	}
}

// explicitTenant creates be, fe1 and fe2 with explicit provisioning lists
// (fe1 needs be, fe2 needs fe1) and empty upgrade lists, at rollout-id r1.
func explicitTenant(w *world) {
	w.create("be", v1, explicitLists(w, nil, nil))
	w.create("fe1", v1, explicitLists(w, []string{"be"}, nil))
	w.create("fe2", v1, explicitLists(w, []string{"fe1"}, nil))
	w.setRolloutID("r1", "be", "fe1", "fe2")
	w.run(400)
}

func TestAChangeLandingNodeByNodeOrdersAsIfAppliedAtOnce(t *testing.T) {
	toV2 := func(s *v2alpha1.NodeSpec) { s.ExpressVersion = v2 }
	upOnV2 := func(s *v2alpha1.NodeSpec) { s.ExpressVersion = v2; s.Up = nil }
	down := func(s *v2alpha1.NodeSpec) { s.Up = ptr.To(false) }
	for _, c := range []struct {
		name          string
		setup         []step
		atOnce, split []step
		want          string
	}{
		{
			name:   "a render bringing fe1 and fe2 back up that reaches fe2 first",
			setup:  []step{settledByRolloutID(5, "r1"), up("fe1", ptr.To(false)), up("fe2", ptr.To(false)), settle},
			atOnce: []step{render("r2", true, 0, "fe2", "be", "fe1", "fe3", "fe4")},
			split:  []step{render("r2", true, 0, "fe2"), ticks(10), render("r2", true, 0, "be", "fe1", "fe3", "fe4")},
			want:   "fe1 fe2 be fe3 fe4",
		},
		{
			name:   "a render bringing fe1 back up that reaches fe2 first, fe2 crashing",
			setup:  []step{settledByRolloutID(5, "r1"), up("fe1", ptr.To(false)), settle},
			atOnce: []step{render("r2", true, 0, "fe2", "be", "fe1", "fe3", "fe4"), crash("fe2")},
			split:  []step{render("r2", true, 0, "fe2"), crash("fe2"), ticks(10), render("r2", true, 0, "be", "fe1", "fe3", "fe4")},
			want:   "fe1 fe2 be fe3 fe4",
		},
		{
			name:   "a render that gives fe1 empty lists reaching the crashed backend first",
			setup:  []step{settledByRolloutID(5, "r1")},
			atOnce: []step{render("r2", false, 0, "be"), renderLists("r2", "fe1", nil, nil), render("r2", false, 0, "fe2", "fe3", "fe4"), crash("be")},
			split:  []step{render("r2", false, 0, "be"), crash("be"), ticks(10), renderLists("r2", "fe1", nil, nil), render("r2", false, 0, "fe2", "fe3", "fe4")},
			want:   "fe1 be fe2 fe3 fe4",
		},
		{
			name:   "a render bringing the whole tenant back up that reaches fe1 first and be last",
			setup:  []step{settledByRolloutID(4, "r1"), up("be", ptr.To(false)), up("fe1", ptr.To(false)), up("fe2", ptr.To(false)), up("fe3", ptr.To(false)), settle},
			atOnce: []step{render("r2", true, 0, "fe1", "fe2", "fe3", "be")},
			split:  []step{render("r2", true, 5, "fe1", "fe2", "fe3", "be")},
			want:   "be fe1 fe2 fe3",
		},
		{
			name:   "a render bringing be back up that reaches the crashed fe1 first",
			setup:  []step{settledByRolloutID(4, "r1"), up("be", ptr.To(false)), settle, crash("fe1")},
			atOnce: []step{render("r2", true, 0, "fe1", "fe2", "fe3", "be")},
			split:  []step{render("r2", true, 5, "fe1", "fe2", "fe3", "be")},
			want:   "be fe1 fe2 fe3",
		},
		{
			name:   "a render that takes fe1 down and brings be back up, reaching the crashed fe2 first (fe2 needs fe1, fe1 needs be)",
			setup:  []step{explicitTenant, up("be", ptr.To(false)), settle},
			atOnce: []step{crash("fe2"), renderEdit("r2", "fe2", toV2), renderEdit("r2", "be", upOnV2), renderEdit("r2", "fe1", down)},
			split:  []step{crash("fe2"), renderEdit("r2", "fe2", toV2), ticks(10), renderEdit("r2", "be", upOnV2), renderEdit("r2", "fe1", down)},
			want:   "be fe2",
		},
		{
			name:  "a render that brings fe1 back up with empty lists, reaching the crashed be and fe2 first (the old chart's lists)",
			setup: []step{oldChart(3), func(w *world) { w.setRolloutID("r1", "be", "fe1", "fe2"); w.run(400) }, up("fe1", ptr.To(false)), settle},
			atOnce: []step{crash("be"), renderEdit("r2", "be", toV2), renderEdit("r2", "fe2", toV2),
				func(w *world) {
					renderEdit("r2", "fe1", func(s *v2alpha1.NodeSpec) { upOnV2(s); explicitLists(w, nil, nil)(s) })(w)
				}},
			split: []step{crash("be"), renderEdit("r2", "be", toV2), renderEdit("r2", "fe2", toV2), ticks(10),
				func(w *world) {
					renderEdit("r2", "fe1", func(s *v2alpha1.NodeSpec) { upOnV2(s); explicitLists(w, nil, nil)(s) })(w)
				}},
			want: "fe1 fe2 be",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			atOnce := scenario{setup: c.setup, change: c.atOnce}.play(newWorld(t, "acme"))
			split := scenario{setup: c.setup, change: c.split}.play(newWorld(t, "acme"))
			assert.Equal(t, c.want, atOnce, "applied at once")
			assert.Equal(t, c.want, split, "applied node by node")
		})
	}
}

// A crashed backend the newest render has not reached yet is not released
// for the target it has: that target is about to change.
func TestACrashedBackendTheNewestRenderHasNotReachedWaitsForIt(t *testing.T) {
	w := newWorld(t, "acme")
	settledByRolloutID(5, "r1")(w)
	mark := len(w.started)
	render("r2", false, 0, "fe1", "fe2")(w)
	w.update("be", func(n v2alpha1.Node) { n.NodeSpec().ConfigChangeset = "not-from-a-render" })
	w.crash("be")
	ticks(10)(w)
	assert.Empty(t, w.startedSince(mark), "nothing starts while the render has not reached be")
	assert.True(t, Gated(w.nodes[w.name("be")]), "be is held: %s", w.condition("be").Message)
}

// A node brought back up on the target it was released for is provisioned:
// only its provisioning list orders it, so it waits for no more of a
// landing than that list reaches (crash recovery never waits).
func TestANodeBroughtBackUpWaitsOnlyForItsProvisioningListToLand(t *testing.T) {
	w := newWorld(t, "acme")
	oldChart(5)(w)
	w.setRolloutID("r1", keysOf(5)...)
	w.run(400)
	up("fe3", ptr.To(false))(w)
	settle(w)
	mark := len(w.started)
	renderEdit("r2", "fe3", func(s *v2alpha1.NodeSpec) { s.Up = nil })(w)
	renderIDOnly("r2", "fe2", "be", "fe1")(w)
	ticks(30)(w)
	assert.Equal(t, "fe3", w.startedSince(mark), "fe3 starts while fe4, after it in every order, has not landed: %s", w.condition("fe3").Message)
	renderEdit("r2", "fe4", func(s *v2alpha1.NodeSpec) { s.ExpressVersion = v2 })(w)
	w.run(200)
	assert.Equal(t, "fe3 fe4", w.startedSince(mark))
}
