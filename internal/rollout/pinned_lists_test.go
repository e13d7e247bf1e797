package rollout

// The user's old chart renders every prerequisite entry with the named
// node's expressVersion pinned. A version change to all then asks fe1 to
// wait for be on the new version (its provisioning pin), be for fe2 on its
// target and fe2 for fe1 on the new version: a loop, since a pin the
// node's pods do not run is met only by its rollout. The provisioning
// order breaks it (DESIGN §4): be first.

import (
	"testing"

	"github.com/stretchr/testify/assert"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// pinnedOldChart renders the old chart's lists at version, every entry
// pinned to it, as the user's template does.
func pinnedOldChart(w *world, size int, version string) {
	prov, upg := oldChartLists(size)
	for _, k := range keysOf(size) {
		edit := func(s *v2alpha1.NodeSpec) {
			s.ExpressVersion = version
			explicitLists(w, prov[k], upg[k])(s)
			for i := range s.DeploymentDependencies.ProvisioningPrerequisites {
				s.DeploymentDependencies.ProvisioningPrerequisites[i].ExpressVersion = version
			}
			for i := range s.DeploymentDependencies.UpgradePrerequisites {
				s.DeploymentDependencies.UpgradePrerequisites[i].ExpressVersion = version
			}
		}
		if _, ok := w.nodes[w.name(k)]; ok {
			w.update(k, func(n v2alpha1.Node) { edit(n.NodeSpec()) })
		} else {
			w.create(k, version, edit)
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
