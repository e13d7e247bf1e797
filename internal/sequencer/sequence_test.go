package sequencer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/golden"
)

const (
	v1 = "express-e689.151"
	v2 = "express-e689.154"
)

func keysOf(size int) []string {
	keys := []string{"be"}
	for i := 1; i < size; i++ {
		keys = append(keys, fmt.Sprintf("fe%d", i))
	}
	return keys
}

func frontends(size int) []string { return keysOf(size)[1:] }

// scenario sets a world up, changes it, and returns the rollouts the
// operator started after the change.
type scenario struct {
	name string
	// want is the order the operator must start rolling nodes in.
	want string
	run  func(w *world) string
}

func settledTenant(w *world, size int) int {
	w.tenant(size, v1)
	w.run(400)
	return len(w.started)
}

var scenarios = []scenario{
	{"a new tenant is provisioned backend first", "be fe1 fe2 fe3 fe4", func(w *world) string {
		w.tenant(5, v1)
		w.run(200)
		return w.startedSince(0)
	}},
	{"a change to all nodes upgrades fe1 and fe2 before the backend", "fe1 fe2 be fe3 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.setVersion(v2, keysOf(5)...)
		w.run(200)
		return w.startedSince(mark)
	}},
	{"a change to frontends only upgrades them in number order", "fe1 fe2 fe3 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.setVersion(v2, frontends(5)...)
		w.run(200)
		return w.startedSince(mark)
	}},
	{"a change to the backend only rolls the backend alone", "be", func(w *world) string {
		mark := settledTenant(w, 5)
		w.setVersion(v2, "be")
		w.run(200)
		return w.startedSince(mark)
	}},
	{"with fe2 down a change to all skips fe2 and closes the gap", "fe1 be fe3 fe4", func(w *world) string {
		settledTenant(w, 5)
		w.update("fe2", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
		w.run(200)
		mark := len(w.started)
		w.setVersion(v2, keysOf(5)...)
		w.run(200)
		return w.startedSince(mark)
	}},
	{"all nodes crashed come back backend first", "be fe1 fe2 fe3 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.crash(keysOf(5)...)
		w.run(200)
		return w.startedSince(mark)
	}},
	{"a crashed backend recovers before a pending frontend change", "be fe1 fe2 fe3 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.setVersion(v2, frontends(5)...)
		w.crash("be")
		w.run(200)
		return w.startedSince(mark)
	}},
	{"crashed fe2 and fe4 recover fe2 first", "fe2 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.crash("fe2", "fe4")
		w.run(200)
		return w.startedSince(mark)
	}},
	{"a two-node tenant is provisioned be, fe1 and upgraded fe1, be", "be fe1 | fe1 be", func(w *world) string {
		mark := settledTenant(w, 2)
		w.setVersion(v2, keysOf(2)...)
		w.run(200)
		return w.startedSince(0)[:len("be fe1")] + " | " + w.startedSince(mark)
	}},
	{"a twelve-node tenant upgrades fe1, fe2, be, then fe3 to fe11", "fe1 fe2 be fe3 fe4 fe5 fe6 fe7 fe8 fe9 fe10 fe11", func(w *world) string {
		mark := settledTenant(w, 12)
		w.setVersion(v2, keysOf(12)...)
		w.run(400)
		return w.startedSince(mark)
	}},
	{"a per-node version override rolls only that node", "fe1", func(w *world) string {
		mark := settledTenant(w, 5)
		w.setVersion(v2, "fe1")
		w.run(200)
		return w.startedSince(mark)
	}},
	{"with fe2 toggled down mid-rollout the order is recomputed", "fe1 be fe3 fe4 fe2", func(w *world) string {
		mark := settledTenant(w, 5)
		w.setVersion(v2, keysOf(5)...)
		for w.startedSince(mark) == "" {
			w.tick++
			w.sequence()
			w.operate()
		}
		w.update("fe2", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
		w.run(200)
		w.update("fe2", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(true) })
		w.run(200)
		return w.startedSince(mark)
	}},
	{"a config-only change to all nodes upgrades fe1 and fe2 before the backend", "fe1 fe2 be fe3 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.setConfig("changeset-2", keysOf(5)...)
		w.run(200)
		return w.startedSince(mark)
	}},
	{"a change to all while fe3 is crashed rolls fe3 in its upgrade turn", "fe1 fe2 be fe3 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.crash("fe3")
		w.setVersion(v2, keysOf(5)...)
		w.run(200)
		return w.startedSince(mark)
	}},
	{"a change to all that brings fe3 back up rolls fe3 in its upgrade turn", "fe1 fe2 be fe3 fe4", func(w *world) string {
		settledTenant(w, 5)
		w.update("fe3", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
		w.run(200)
		mark := len(w.started)
		for _, k := range keysOf(5) {
			w.update(k, func(n v2alpha1.Node) { n.NodeSpec().ExpressVersion = v2; n.NodeSpec().Up = nil })
		}
		w.run(200)
		return w.startedSince(mark)
	}},
	{"fe3 toggled down and up in the middle of a change to all keeps its upgrade turn", "fe1 fe2 be fe3 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.setVersion(v2, keysOf(5)...)
		for w.startedSince(mark) == "" {
			w.step()
		}
		w.update("fe3", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
		w.step()
		w.step()
		w.update("fe3", func(n v2alpha1.Node) { n.NodeSpec().Up = nil })
		w.run(200)
		return w.startedSince(mark)
	}},
	{"a change to all while be is crashed rolls be first", "be fe1 fe2 fe3 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.crash("be")
		w.setVersion(v2, keysOf(5)...)
		w.run(200)
		return w.startedSince(mark)
	}},
	{"be crashing while fe2 rolls a change to all waits for fe2", "fe1 fe2 be fe3 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.setVersion(v2, keysOf(5)...)
		for !strings.HasSuffix(w.startedSince(mark), "fe2") {
			w.step()
		}
		w.crash("be")
		w.run(200)
		return w.startedSince(mark)
	}},
	{"all pods of all nodes recreated at once recover backend first", "be fe1 fe2 fe3 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.evict(keysOf(5)...)
		w.run(200)
		return w.startedSince(mark)
	}},
	{"fe3 Ready on a new target before the sequencer saw it recovers after be, fe1, fe2 when all pods are lost", "fe1 fe2 be fe3 | be fe1 fe2 fe3 fe4 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.setVersion(v2, keysOf(5)...)
		for !strings.HasSuffix(w.startedSince(mark), "fe3") {
			w.step()
		}
		for w.rolling[w.name("fe3")] > 0 {
			w.operate() // the sequencer does not run: nothing records fe3's rollout complete
		}
		upgrade := w.startedSince(mark)
		mark = len(w.started)
		w.evict(keysOf(5)...)
		w.run(200)
		return upgrade + " | " + w.startedSince(mark)
	}},
	{"pods of a rolling frontend lost together with the backend wait for it", "fe1 | be fe1 fe2 fe3 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.setVersion(v2, frontends(5)...)
		for w.startedSince(mark) == "" {
			w.step()
		}
		upgrade := w.startedSince(mark)
		mark = len(w.started)
		w.evict("be", "fe1")
		w.sequence()
		if c := w.condition("fe1"); c.Reason != v2alpha1.ReasonRolloutPodsHeld {
			w.t.Fatalf("fe1's condition is %v, want reason %s", c, v2alpha1.ReasonRolloutPodsHeld)
		}
		w.run(200)
		return upgrade + " | " + w.startedSince(mark)
	}},
	{"pods of a rolling fe2 lost together with the backend that waits for it finish the rollout first", "fe1 fe2 | be fe2 be fe3 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.setVersion(v2, keysOf(5)...)
		for !strings.HasSuffix(w.startedSince(mark), "fe2") {
			w.step()
		}
		upgrade := w.startedSince(mark)
		mark = len(w.started)
		w.evict("be", "fe2")
		w.run(200)
		return upgrade + " | " + w.startedSince(mark)
	}},
	{"pods of fe2 and fe4 recreated at once recover fe2 first", "fe2 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.evict("fe2", "fe4")
		w.run(200)
		return w.startedSince(mark)
	}},
	{"a node deleted while the backend waits for it leaves the order", "fe1 be fe3 fe4", func(w *world) string {
		mark := settledTenant(w, 5)
		w.setVersion(v2, keysOf(5)...)
		for w.startedSince(mark) == "" {
			w.step()
		}
		w.remove("fe2")
		w.run(200)
		return w.startedSince(mark)
	}},
	{"a render that brings fe3 back up with fe3 landing last after a long gap keeps its turn", "fe1 fe2 be fe3 fe4", func(w *world) string {
		w.tenant(5, v1)
		w.setRolloutID("r1", keysOf(5)...)
		w.run(400)
		w.update("fe3", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
		w.run(400)
		mark := len(w.started)
		for _, k := range []string{"be", "fe1", "fe2", "fe4", "fe3"} {
			w.update(k, func(n v2alpha1.Node) {
				n.NodeSpec().ExpressVersion = v2
				n.NodeSpec().Up = nil
				setAnnotation(n, v2alpha1.AnnotationRolloutID, "r2")
			})
			if k == "fe4" {
				for range 40 { // the node brought back up lands last
					w.step()
				}
			}
		}
		w.run(200)
		return w.startedSince(mark)
	}},
	{"a change applied node by node with long gaps is ordered as one by rollout-id", "fe1 fe2 be fe3 fe4", func(w *world) string {
		w.tenant(5, v1)
		w.setRolloutID("r1", keysOf(5)...)
		w.run(400)
		mark := len(w.started)
		for _, k := range keysOf(5) { // backend first, 30 ticks apart
			w.update(k, func(n v2alpha1.Node) {
				n.NodeSpec().ExpressVersion = v2
				setAnnotation(n, v2alpha1.AnnotationRolloutID, "r2")
			})
			for range 30 {
				w.step()
			}
		}
		w.run(200)
		return w.startedSince(mark)
	}},
}

func TestRolloutSequences(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			w := newWorld(t, "acme")
			assert.Equal(t, sc.want, sc.run(w), "rollout order")
			golden.Assert(t, sc.name, strings.Join(w.log, "\n")+"\n")
		})
	}
}

// The same scenarios with random rollout durations, crash recovery delays
// and operator processing orders, and sequencer and operator taking turns in
// random order: the order of rollouts does not change.
func TestRolloutSequencesInRandomInterleavings(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 25; seed++ {
				w := newWorld(t, "acme")
				w.rng = rand.New(rand.NewPCG(seed, seed*7919))
				require.Equal(t, sc.want, sc.run(w), "seed %d:\n%s", seed, strings.Join(w.log, "\n"))
			}
		})
	}
}

func TestDisabledDependenciesReleaseEveryNodeAtOnce(t *testing.T) {
	w := newWorld(t, "acme")
	none := func(s *v2alpha1.NodeSpec) {
		s.DeploymentDependencies = &v2alpha1.DeploymentDependencies{ProvisioningPrerequisites: []v2alpha1.Prerequisite{}, UpgradePrerequisites: []v2alpha1.Prerequisite{}}
	}
	for _, k := range keysOf(5) {
		w.create(k, v1, none)
	}
	w.tick++
	w.sequence()
	w.operate()
	assert.Equal(t, keysOf(5), w.started, "every node is released in the first round, without waiting")
	golden.Assert(t, "disabled dependencies", strings.Join(w.log, "\n")+"\n")
}

func TestPauseHoldsANodeAndEverythingAfterIt(t *testing.T) {
	w := newWorld(t, "acme")
	mark := settledTenant(w, 5)
	w.annotate("fe2", v2alpha1.AnnotationPauseRollout, "true")
	w.setVersion(v2, keysOf(5)...)
	for i := 0; i < 30; i++ {
		w.tick++
		w.sequence()
		w.operate()
	}
	assert.Equal(t, "fe1", w.startedSince(mark), "only fe1 rolls while fe2 is paused")
	assert.Equal(t, v2alpha1.ReasonRolloutPaused, w.condition("fe2").Reason)
	assert.Contains(t, w.condition("be").Message, "waiting for acme-fe2 (Frontend) which is paused")

	w.annotate("fe2", v2alpha1.AnnotationPauseRollout, "")
	assert.True(t, w.nodes["acme-fe2"].NodeSpec().HasGate(v2alpha1.GateSequencer), "resuming is not a new target")
	w.run(200)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", w.startedSince(mark))
	golden.Assert(t, "pause and resume", strings.Join(w.log, "\n")+"\n")
}

func TestIgnorePrerequisitesReleasesANodeAtOnce(t *testing.T) {
	w := newWorld(t, "acme")
	mark := settledTenant(w, 5)
	w.annotate("fe4", v2alpha1.AnnotationIgnorePrerequisites, "true")
	w.setVersion(v2, keysOf(5)...)
	w.run(200)
	assert.Equal(t, "fe1 fe4 fe2 be fe3", w.startedSince(mark))
	golden.Assert(t, "ignore prerequisites", strings.Join(w.log, "\n")+"\n")
}

func TestAStalledRolloutIsReportedAndItsDependentsStayGated(t *testing.T) {
	w := newWorld(t, "acme")
	w.deadline = 10 * time.Second
	mark := settledTenant(w, 5)
	w.stuck["acme-fe1"] = true
	w.setVersion(v2, keysOf(5)...)
	for i := 0; i < 30; i++ {
		w.tick++
		w.now = w.now.Add(time.Second)
		w.sequence()
		w.operate()
	}
	assert.Equal(t, "fe1", w.startedSince(mark))
	c := w.condition("fe1")
	assert.Equal(t, v2alpha1.ReasonProgressDeadlineExceeded, c.Reason)
	assert.Contains(t, c.Message, "released but not Ready on express-e689.154 (target bf26eb65ce111328) within 10s: 0/1 pods Ready on target")
	assert.False(t, w.nodes["acme-fe1"].NodeSpec().HasGate(v2alpha1.GateSequencer), "nothing is reverted")
	assert.True(t, w.nodes["acme-fe2"].NodeSpec().HasGate(v2alpha1.GateSequencer))
	golden.Assert(t, "stalled rollout", strings.Join(w.log, "\n")+"\n")
}

func TestAWaitForCycleIsReported(t *testing.T) {
	w := newWorld(t, "acme")
	w.oracle = nil
	mark := settledTenant(w, 5)
	// fe1 waits for fe3 explicitly; fe3 waits for fe1 by the default order.
	w.update("fe1", func(n v2alpha1.Node) {
		n.NodeSpec().DeploymentDependencies.UpgradePrerequisites = []v2alpha1.Prerequisite{{ExpressNode: "acme-fe3", Kind: "Frontend", PodConditionType: "Ready", ConditionStatus: "True"}}
	})
	w.setVersion(v2, keysOf(5)...)
	for i := 0; i < 10; i++ {
		w.tick++
		w.sequence()
		w.operate()
	}
	assert.Equal(t, "", w.startedSince(mark))
	for _, k := range []string{"fe1", "fe3"} {
		c := w.condition(k)
		assert.Equal(t, v2alpha1.ReasonDependencyCycle, c.Reason, k)
		assert.Contains(t, c.Message, "wait for each other and can never be released", k)
	}
	assert.Contains(t, w.condition("fe1").Message, "acme-fe1 → acme-fe3 → acme-fe1")
	assert.Equal(t, v2alpha1.ReasonWaitingForPrerequisite, w.condition("fe4").Reason, "fe4 waits, but nothing waits for it: it is in no loop")
}

func TestASteadyTenantIsLeftAlone(t *testing.T) {
	w := newWorld(t, "acme")
	settledTenant(w, 5)
	released := w.released
	for i := 0; i < 5; i++ {
		w.tick++
		w.sequence()
		w.operate()
	}
	assert.Equal(t, released, w.released)
	for _, k := range keysOf(5) {
		assert.False(t, w.nodes[w.name(k)].NodeSpec().HasGate(v2alpha1.GateSequencer), k)
		assert.Equal(t, v2alpha1.ReasonRolloutComplete, w.condition(k).Reason, k)
	}
}

// Helm and Argo CD apply a tenant's nodes one after the other. Without a
// settle time the sequencer would see "the backend alone changed" first and
// roll it before the frontends' change arrives.
func TestAChangeLandingNodeByNodeIsOrderedAsOneRollout(t *testing.T) {
	for _, c := range []struct {
		name   string
		settle time.Duration
		want   string
	}{
		{"without a settle time the backend, applied first, rolls first", 0, "be fe1 fe2 fe3 fe4"},
		{"with a settle time the whole change is ordered", 5 * time.Second, "fe1 fe2 be fe3 fe4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, "acme")
			w.oracle = nil // the oracle knows nothing of settling
			mark := settledTenant(w, 5)
			w.grouping.SettleTime = c.settle
			for _, k := range keysOf(5) { // one node per second, backend first
				w.setVersion(v2, k)
				w.tick++
				w.now = w.now.Add(time.Second)
				w.sequence()
				w.operate()
			}
			w.run(200)
			assert.Equal(t, c.want, w.startedSince(mark))
		})
	}
}

// Without rollout-id the settle time groups a change; its cap keeps a node
// whose field is rewritten forever from starving the rest of the tenant.
func TestANodeRewrittenEveryThreeSecondsHoldsABackendChangeNoLongerThanTheCap(t *testing.T) {
	w := newWorld(t, "acme")
	w.oracle = nil // fe4 keeps changing: its own releases are not the point here
	mark := settledTenant(w, 5)
	w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
	start := w.now
	w.setVersion(v2, "be")
	for i := 0; !strings.Contains(w.startedSince(mark), "be") && i < 300; i++ {
		if i%3 == 0 {
			w.setConfig(fmt.Sprintf("changeset-%d", i), "fe4")
		}
		w.step()
	}
	require.Contains(t, w.startedSince(mark), "be", "the backend change was starved")
	assert.LessOrEqual(t, w.now.Sub(start), time.Minute+3*time.Second, "released within the cap (and a tick or two)")
	assert.GreaterOrEqual(t, w.now.Sub(start), time.Minute, "held for the cap while the tenant kept changing")
}

// With rollout-id a tenant is released the instant its nodes agree, with no
// settle time at all; a node that never gets the new id holds it only until
// the landing timeout, and the release then says so in a Warning Event.
func TestALandingTimeoutProceedsWithWhatLandedAndWarns(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(5, v1)
	w.setRolloutID("r1", keysOf(5)...)
	w.run(400)
	mark := len(w.started)
	w.grouping = Grouping{LandingTimeout: 30 * time.Second, SettleTime: 10 * time.Second}
	for _, k := range []string{"be", "fe1", "fe2", "fe3"} { // fe4 is never re-rendered
		w.update(k, func(n v2alpha1.Node) {
			n.NodeSpec().ExpressVersion = v2
			setAnnotation(n, v2alpha1.AnnotationRolloutID, "r2")
		})
	}
	w.step()
	assert.Equal(t, v2alpha1.ReasonChangeLanding, w.condition("fe1").Reason)
	assert.Contains(t, w.condition("fe1").Message, "acme-fe4 (r1) of 5 nodes still lack rollout-id r2")
	for range 28 {
		w.step()
	}
	assert.Equal(t, "", w.startedSince(mark), "held until the landing timeout")
	w.now = w.now.Add(2 * time.Second)
	for _, d := range Plan(w.snapshot()) {
		if d.Node == "acme-fe1" {
			require.NotNil(t, d.Event)
			assert.Equal(t, corev1.EventTypeWarning, d.Event.Type, "proceeding past the landing timeout is a Warning Event")
			assert.False(t, d.Gated)
		}
	}
	w.run(200)
	assert.Equal(t, "fe1 fe2 be fe3", w.startedSince(mark))
	assert.True(t, slices.ContainsFunc(w.log, func(l string) bool {
		return strings.Contains(l, "fe1 Released:") && strings.Contains(l, "did not fully land within the landing timeout (30s)")
	}), "the release says it proceeded with what landed")
}
