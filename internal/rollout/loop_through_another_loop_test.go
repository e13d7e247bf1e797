package rollout

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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

// upgradeLists sets a node's upgrade list (nil: both lists defaulted; a
// provisioning list defaulted either way).
func upgradeLists(w *world, keys ...string) func(*v2alpha1.NodeSpec) {
	return func(s *v2alpha1.NodeSpec) {
		if keys == nil {
			return
		}
		s.DeploymentDependencies = &v2alpha1.DeploymentDependencies{UpgradePrerequisites: []v2alpha1.Prerequisite{}}
		for _, k := range keys {
			s.DeploymentDependencies.UpgradePrerequisites = append(s.DeploymentDependencies.UpgradePrerequisites, prereqOf(w, k))
		}
	}
}

// Two upgrade waits found circular in one round, the loop of one running
// through the other: only the one on a loop of its own is dropped. The
// world's oracle checks every release against the drops the plan made,
// each on a loop of its own with the others made.
func TestAWaitOnALoopOnlyThroughAnotherDroppedWaitIsKept(t *testing.T) {
	for _, tc := range []struct {
		name         string
		lists        map[string][]string
		crash        string
		before, kept string // kept is not released before before is on target
		wantStarted  string
		cycle        bool
	}{
		{
			// fe2 ⇄ fe4 ⇄ crashed fe3: fe2's wait on fe4 is dropped
			// (fe4 is provisioned after fe2). be's defaulted wait on fe2
			// lies on a loop only through fe2's wait on fe4: be goes after
			// fe2, as its list says.
			name:  "be's defaulted wait on fe2, on a loop through fe2's dropped wait on fe4, holds be until fe2 is on target",
			lists: map[string][]string{"fe2": {"fe4", "fe1"}}, crash: "fe3",
			before: "fe2", kept: "be", wantStarted: "fe1 fe2 be fe3 fe4",
		},
		{
			// be ⇄ fe3 is a loop of upgrade waits only; be → fe3 → (ready
			// fe2) → fe2 → fe4 → be runs through fe2's wait on fe4, which
			// is dropped (fe2 crashed): be stays a DependencyCycle.
			name:  "a pure upgrade loop beside a loop through another dropped wait stays a cycle",
			lists: map[string][]string{"be": {"fe3"}, "fe2": {"fe3", "fe4"}}, crash: "fe2",
			before: "fe3", kept: "be", cycle: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "acme")
			for _, k := range keysOf(5) {
				w.create(k, v1, upgradeLists(w, tc.lists[k]...))
			}
			w.run(400)
			mark := len(w.started)
			w.crash(tc.crash)
			w.setVersion(v2, keysOf(5)...)
			for range 60 {
				w.step()
				if slices.Contains(w.started[mark:], tc.kept) {
					require.True(t, slices.Contains(w.started[mark:], tc.before) && onTarget(w, tc.before),
						"%s started before %s is Ready on target: %v", tc.kept, tc.before, w.started[mark:])
				}
			}
			if tc.cycle {
				d := decisionFor(t, w, tc.kept)
				assert.Equal(t, v2alpha1.ReasonDependencyCycle, d.Condition.Reason, d.Condition.Message)
				return
			}
			assert.Equal(t, tc.wantStarted, strings.Join(w.started[mark:], " "))
		})
	}
}

// onTarget: every pod of the node runs its stamped target, Ready, and the
// node is not gated.
func onTarget(w *world, key string) bool {
	name := w.name(key)
	n := w.nodes[name]
	if Gated(n) || len(w.pods[name]) == 0 {
		return false
	}
	for _, p := range w.pods[name] {
		if p.Hash != StampedTarget(n) || p.Conditions["Ready"] != "True" {
			return false
		}
	}
	return true
}
