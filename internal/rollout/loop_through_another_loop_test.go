package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// be's explicit upgrade list names fe3, whose defaulted upgrade list waits
// for be: a loop of upgrade waits only, which no order satisfies and the
// provisioning order does not break. fe2, crashed during a change to all,
// has the explicit upgrade list [fe3]; fe3 is provisioned after fe2, so fe2
// ↔ fe3 is a loop with a wait for readiness in it — one the provisioning
// order breaks. A walk from be's wait on fe3 back to be's release that
// passes through that other loop repeats fe3; it is no loop of be's, and
// be's wait on fe3 stands: be is not released before fe3 is on target.
func TestAPureUpgradeLoopIsNotBrokenThroughAnotherLoopBesideIt(t *testing.T) {
	upgradeList := func(keys ...string) func(w *world) func(*v2alpha1.NodeSpec) {
		return func(w *world) func(*v2alpha1.NodeSpec) {
			return func(s *v2alpha1.NodeSpec) {
				if len(keys) == 0 {
					return // both lists defaulted
				}
				s.DeploymentDependencies = &v2alpha1.DeploymentDependencies{} // provisioning defaulted
				for _, k := range keys {
					s.DeploymentDependencies.UpgradePrerequisites = append(s.DeploymentDependencies.UpgradePrerequisites, prereqOf(w, k))
				}
			}
		}
	}
	for _, tc := range []struct {
		name     string
		fe2Lists []string
		crashFe2 bool
	}{
		{name: "with fe2 crashed and its upgrade list naming fe3, be waits for fe3", fe2Lists: []string{"fe3"}, crashFe2: true},
		{name: "with fe2 Ready and its upgrade list naming fe3, be waits for fe3", fe2Lists: []string{"fe3"}},
		{name: "with fe2 crashed and its defaulted list, be waits for fe3", crashFe2: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "acme")
			w.oracle = nil // it knows no loop
			w.create("be", v1, upgradeList("fe3")(w))
			w.create("fe1", v1, nil)
			w.create("fe2", v1, upgradeList(tc.fe2Lists...)(w))
			w.create("fe3", v1, nil)
			w.run(400)
			mark := len(w.started)
			if tc.crashFe2 {
				w.crash("fe2")
			}
			w.setVersion(v2, keysOf(4)...)
			for range 30 {
				w.step()
			}
			started := w.started[mark:]
			d := decisionFor(t, w, "be")
			assert.NotContains(t, started, "be", "be released with fe3 not on target; started: %v; be: %s", started, d.Condition.Message)
			assert.True(t, d.Gated, "be is held: %s", d.Condition.Message)
			assert.Equal(t, v2alpha1.ReasonDependencyCycle, d.Condition.Reason, d.Condition.Message)
		})
	}
}
