package rollout

// The user's old chart renders every prerequisite entry with the named
// node's expressVersion pinned. A version change to all then asks fe1 to
// wait for be on the new version (its provisioning pin), be for fe2 on its
// target and fe2 for fe1 on the new version: a loop, since a pin the
// node's pods do not run is met only by its rollout. The provisioning
// order breaks it (DESIGN §4): be first.

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// pinnedOldChart renders the old chart's lists at version, every entry
// pinned to it, as the user's template does.
func pinnedOldChart(w *world, size int, version string) {
	versions := map[string]string{}
	for _, k := range keysOf(size) {
		versions[k] = version
	}
	pinnedChart(w, size, versions)
}

// pinEntries pins every entry of spec's lists as pin says for the node the
// entry names; an entry pin does not know (ok false) is left as it is.
func pinEntries(spec *v2alpha1.NodeSpec, pin func(named string) (version, revision string, ok bool)) {
	deps := spec.DeploymentDependencies
	if deps == nil {
		return
	}
	for _, list := range [][]v2alpha1.Prerequisite{deps.ProvisioningPrerequisites, deps.UpgradePrerequisites} {
		for i, e := range list {
			if version, revision, ok := pin(e.ExpressNode); ok {
				list[i].ExpressVersion, list[i].DeploymentRevision = version, revision
			}
		}
	}
}

// pinnedChart renders the old chart's lists with each node at its version
// in versions (v1 if absent), every entry pinned to the version rendered
// for the node it names.
func pinnedChart(w *world, size int, versions map[string]string) {
	version := func(k string) string {
		if v, ok := versions[k]; ok {
			return v
		}
		return v1
	}
	prov, upg := oldChartLists(size)
	for _, k := range keysOf(size) {
		edit := func(s *v2alpha1.NodeSpec) {
			s.ExpressVersion = version(k)
			explicitLists(w, prov[k], upg[k])(s)
			pinEntries(s, func(named string) (string, string, bool) { return version(w.key(named)), "", true })
		}
		if _, ok := w.nodes[w.name(k)]; ok {
			w.update(k, func(n v2alpha1.Node) { edit(n.NodeSpec()) })
		} else {
			w.create(k, version(k), edit)
		}
	}
}

func TestAChangeToAllOnTheOldChartsPinnedListsGoesByTheProvisioningOrder(t *testing.T) {
	w := newWorld(t, "acme")
	pinnedOldChart(w, 5, v1)
	w.run(400)
	assert.Equal(t, "be fe1 fe2 fe3 fe4", w.startedSince(0), "provisioned in order")
	mark := len(w.started)
	pinnedOldChart(w, 5, v2)
	w.run(400)
	assert.Equal(t, "be fe1 fe2 fe3 fe4", w.startedSince(mark), "fe1 needs be on v2: be goes first, its wait for fe2 dropped")
}

func TestAPinnedProvisioningWaitOnANodeThatUpgradesAfterItIsBrokenByTheProvisioningOrder(t *testing.T) {
	w := newWorld(t, "acme")
	lists := map[string]func(version string) func(*v2alpha1.NodeSpec){
		"be": func(version string) func(*v2alpha1.NodeSpec) {
			return func(s *v2alpha1.NodeSpec) { s.ExpressVersion = version; explicitLists(w, nil, []string{"fe1"})(s) }
		},
		"fe1": func(version string) func(*v2alpha1.NodeSpec) {
			return func(s *v2alpha1.NodeSpec) {
				s.ExpressVersion = version
				explicitLists(w, []string{"be"}, nil)(s)
				s.DeploymentDependencies.ProvisioningPrerequisites[0].ExpressVersion = version
			}
		},
	}
	for _, k := range []string{"be", "fe1"} {
		w.create(k, v1, lists[k](v1))
	}
	w.run(200)
	mark := len(w.started)
	for _, k := range []string{"be", "fe1"} {
		w.update(k, func(n v2alpha1.Node) { lists[k](v2)(n.NodeSpec()) })
	}
	w.run(200)
	assert.Equal(t, "be fe1", w.startedSince(mark))
}

// A change to the frontends releases fe1; before the operator creates fe1's
// new pods, the next render changes the backend too, so fe1's provisioning
// entry pins be to be's new version, and be waits for fe1 on its target.
// The half-done rollout of fe1 finishes first (DESIGN §4): its pods are not
// held for a be that waits for them.
func TestARenderRacingAReleaseOnPinnedListsLetsTheHalfDoneRolloutFinish(t *testing.T) {
	w := newWorld(t, "acme")
	pinnedChart(w, 2, nil)
	w.run(200)
	mark := len(w.started)
	pinnedChart(w, 2, map[string]string{"fe1": v2})
	for Gated(w.nodes[w.name("fe1")]) { // sequencer passes until fe1 is released, the operator not yet acting on it
		w.tick++
		w.now = w.now.Add(time.Second)
		w.sequence()
	}
	pinnedChart(w, 2, map[string]string{"be": v2, "fe1": v2})
	w.operate() // fe1's pods for its release
	w.run(300)
	assert.Equal(t, "fe1 be", w.startedSince(mark))
}

// A pin that the named node's own target does not carry (a typo) is met by
// no rollout of it: no loop runs through it, and the Backend keeps its place
// in the upgrade order rather than going first for a loop that is not
// there; fe1 waits for the pin.
func TestAPinNoRolloutMeetsBreaksNoLoop(t *testing.T) {
	w := newWorld(t, "acme")
	pinnedOldChart(w, 5, v1)
	w.run(400)
	mark := len(w.started)
	pinnedOldChart(w, 5, v2)
	w.update("fe1", func(n v2alpha1.Node) {
		n.NodeSpec().DeploymentDependencies.ProvisioningPrerequisites[0].ExpressVersion = "express-e689.999"
	})
	ticks(60)(w)
	assert.Empty(t, w.startedSince(mark), "nothing can start before fe1, which waits for a pin no one meets")
	assert.Contains(t, w.condition("fe1").Message, "express-e689.999")
}
