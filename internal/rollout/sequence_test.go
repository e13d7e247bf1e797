package rollout

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

// A step is one thing that happens to the tenant of a scenario.
type step func(w *world)

// scenario is one golden rollout sequence, declared as data: the tenant as
// it is (setup), what happens to it (change), and the order the operator
// must start rolling nodes in from the change on; " | " separates the
// phases of a change that happens in several acts.
type scenario struct {
	name          string
	setup, change []step
	want          string
	// ticks is the most the change may take to settle (200 when 0).
	ticks int
}

// play sets the world up, makes the change, lets it settle and returns the
// rollouts started since the change, phase by phase.
func (sc scenario) play(w *world) string {
	for _, s := range sc.setup {
		s(w)
	}
	w.phases = []int{len(w.started)}
	for _, s := range sc.change {
		s(w)
	}
	ticks := sc.ticks
	if ticks == 0 {
		ticks = 200
	}
	w.run(ticks)
	var out []string
	for i, from := range w.phases {
		to := len(w.started)
		if i+1 < len(w.phases) {
			to = w.phases[i+1]
		}
		out = append(out, strings.Join(w.started[from:to], " "))
	}
	return strings.Join(out, " | ")
}

// The steps scenarios are made of.
var (
	// settle lets sequencer and operator run until the tenant settles.
	settle step = func(w *world) { w.run(200) }
	// phase starts the next phase of a change.
	phase step = func(w *world) { w.phases = append(w.phases, len(w.started)) }
	// untilAStart runs until a rollout of this phase has started.
	untilAStart step = func(w *world) {
		for w.sinceThisPhase() == "" {
			w.step()
		}
	}
	// untilAStartWithoutTheClock is untilAStart with the clock stopped and
	// the sequencer always first.
	untilAStartWithoutTheClock step = func(w *world) {
		for w.sinceThisPhase() == "" {
			w.tick++
			w.sequence()
			w.operate()
		}
	}
)

// settled is a tenant of size nodes created at v1, settled.
func settled(size int) step { return func(w *world) { settledTenant(w, size) } }

// settledByRolloutID is settled, each node annotated with rollout-id id as
// a chart render does.
func settledByRolloutID(size int, id string) step {
	return func(w *world) {
		w.tenant(size, v1)
		w.setRolloutID(id, keysOf(size)...)
		w.run(400)
	}
}

func newTenant(size int) step { return func(w *world) { w.tenant(size, v1) } }

func version(v string, keys ...string) step { return func(w *world) { w.setVersion(v, keys...) } }

func config(changeset string, keys ...string) step {
	return func(w *world) { w.setConfig(changeset, keys...) }
}

// oneByOne changes configChangeset of the nodes one after the other, gap
// ticks apart, as a kubectl apply of one file per node does.
func oneByOne(changeset string, gap int, keys ...string) step {
	return func(w *world) {
		for _, k := range keys {
			w.setConfig(changeset, k)
			ticks(gap)(w)
		}
	}
}

// bySettleTime groups changes of a tenant without rollout-id by the
// defaults: a settle time of 10 s, capped at a minute.
var bySettleTime step = func(w *world) { w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute} }

// paused annotates a node pause-rollout, or takes the annotation off.
func paused(key string, pause bool) step {
	return func(w *world) { w.annotate(key, v2alpha1.AnnotationPauseRollout, map[bool]string{true: "true"}[pause]) }
}

// unpauseWithConfig takes pause-rollout off a node and changes its
// configChangeset in the same write: a kubectl apply of a manifest that no
// longer carries the annotation.
func unpauseWithConfig(key, changeset string) step {
	return func(w *world) {
		w.update(key, func(n v2alpha1.Node) {
			setAnnotation(n, v2alpha1.AnnotationPauseRollout, "")
			n.NodeSpec().ConfigChangeset = changeset
		})
	}
}

// stuck makes a node's rollouts never become Ready, or lets them go on.
func stuck(key string, stuck bool) step { return func(w *world) { w.stuck[w.name(key)] = stuck } }

func crash(keys ...string) step { return func(w *world) { w.crash(keys...) } }

func evict(keys ...string) step { return func(w *world) { w.evict(keys...) } }

func blip(keys ...string) step { return func(w *world) { w.blip(keys...) } }

func scaleUp(keys ...string) step { return func(w *world) { w.scaleUp(keys...) } }

func lose(keys ...string) step { return func(w *world) { w.lose(keys...) } }

// untilReady runs until key is Ready on its target and not gated.
func untilReady(key string) step {
	return func(w *world) {
		for i := 0; !w.snapshot().converged(w.name(key)); i++ {
			if i == 1000 {
				w.t.Fatalf("%s did not become Ready on its target in 1,000 ticks:\n%s", key, strings.Join(w.log, "\n"))
			}
			w.step()
		}
	}
}

// oldChart creates a tenant of size nodes at v1 with the explicit lists the
// user's chart renders from allNodeConfig (seed 004): provisioning fe1→be,
// feK→fe(K-1); upgrade fe2→fe1, be→fe2, fe3→be, feK→fe(K-1); the first of
// each order an explicit empty list.
// oldChartLists are the old chart's lists of a tenant of size nodes: each
// node's one predecessor, by key.
func oldChartLists(size int) (prov, upg map[string][]string) {
	prov = map[string][]string{"be": nil}
	upg = map[string][]string{"be": {"fe2"}, "fe1": nil, "fe2": {"fe1"}, "fe3": {"be"}}
	for i := 1; i < size; i++ {
		k := fmt.Sprintf("fe%d", i)
		prov[k] = []string{keysOf(size)[i-1]}
		if i > 3 {
			upg[k] = []string{fmt.Sprintf("fe%d", i-1)}
		}
	}
	if size < 3 {
		upg["be"] = []string{"fe1"}
	}
	return prov, upg
}

func oldChart(size int) step {
	return func(w *world) {
		prov, upg := oldChartLists(size)
		for _, k := range keysOf(size) {
			w.create(k, v1, explicitLists(w, prov[k], upg[k]))
		}
		w.run(400)
	}
}

func remove(key string) step { return func(w *world) { w.remove(key) } }

// up sets a node's up flag: false takes it down, nil brings it back up by
// default.
func up(key string, up *bool) step {
	return func(w *world) { w.update(key, func(n v2alpha1.Node) { n.NodeSpec().Up = up }) }
}

// render changes nodes one after the other as a chart render of rollout-id
// id on v2 does, gap ticks apart; upByDefault also drops their up flag.
func render(id string, upByDefault bool, gap int, keys ...string) step {
	return func(w *world) {
		for _, k := range keys {
			w.update(k, func(n v2alpha1.Node) {
				n.NodeSpec().ExpressVersion = v2
				if upByDefault {
					n.NodeSpec().Up = nil
				}
				setAnnotation(n, v2alpha1.AnnotationRolloutID, id)
			})
			ticks(gap)(w)
		}
	}
}

// changeAllUp sets version v2 and drops the up flag of every node at once.
func changeAllUp(size int) step {
	return func(w *world) {
		for _, k := range keysOf(size) {
			w.update(k, func(n v2alpha1.Node) { n.NodeSpec().ExpressVersion = v2; n.NodeSpec().Up = nil })
		}
	}
}

// otherGate adds another system's rollout gate to the nodes, or lifts it:
// the operator does not act on a node while it carries one.
func otherGate(hold bool, keys ...string) step {
	return func(w *world) {
		if hold {
			for _, k := range keys {
				if !w.nodes[w.name(k)].NodeSpec().HasGate(otherSystemsGate) {
					w.toggleOtherSystemsGate(k)
				}
			}
			return
		}
		w.liftOtherSystemsGate(keys...)
	}
}

// untilReleased runs until the sequencer has released key.
func untilReleased(key string) step { return func(w *world) { w.stepUntilReleased(key) } }

// rollBackTakingDown sets version v on the nodes, and takes node down
// down in the same write as its own version change (one sync of a render
// that rolls back and sets nodes.<down>.up: false).
func rollBackTakingDown(v, down string, keys ...string) step {
	return func(w *world) {
		for _, k := range keys {
			w.update(k, func(n v2alpha1.Node) {
				n.NodeSpec().ExpressVersion = v
				if k == down {
					n.NodeSpec().Up = ptr.To(false)
				}
			})
		}
	}
}

// recreate deletes the nodes and creates them again at once, their old
// workload left to the garbage collector for a few looks.
func recreate(keys ...string) step { return func(w *world) { w.recreate(keys...) } }

// renderDropping applies, node by node, a render of rollout-id id (a new
// configChangeset) that no longer renders node dropped of a tenant of size
// nodes: it reaches every other node, and says which it renders.
func renderDropping(id, dropped string, size int) step {
	return func(w *world) {
		rendered := slices.DeleteFunc(keysOf(size), func(k string) bool { return k == dropped })
		for _, k := range rendered {
			w.update(k, func(n v2alpha1.Node) {
				n.NodeSpec().ConfigChangeset = id
				w.renderOf(n, id, rendered)
			})
		}
	}
}

// landingTimeout sets the change grouping's landing timeout.
func landingTimeout(d time.Duration) step {
	return func(w *world) { w.grouping = Grouping{LandingTimeout: d, SettleTime: 10 * time.Second} }
}

func ticks(n int) step {
	return func(w *world) {
		for range n {
			w.step()
		}
	}
}

// untilStarted runs until key's rollout is the last one of this phase; it
// fails the scenario if that takes more than 1,000 ticks.
func untilStarted(key string) step {
	return func(w *world) {
		for i := 0; !strings.HasSuffix(w.sinceThisPhase(), key); i++ {
			if i == 1000 {
				w.t.Fatalf("%s did not start as the last rollout of this phase (%q) in 1,000 ticks:\n%s", key, w.sinceThisPhase(), strings.Join(w.log, "\n"))
			}
			w.step()
		}
	}
}

// rolledWithoutTheSequencer lets the operator alone finish key's rollout:
// nothing records it complete.
func rolledWithoutTheSequencer(key string) step {
	return func(w *world) {
		for w.rolling[w.name(key)] > 0 {
			w.operate()
		}
	}
}

// holds fails the scenario unless, after a sequencer pass, key's condition
// has reason.
func holds(key, reason string) step {
	return func(w *world) {
		w.sequence()
		if c := w.condition(key); c.Reason != reason {
			w.t.Fatalf("%s's condition is %v, want reason %s", key, c, reason)
		}
	}
}

// settledTenant creates a tenant of size nodes at v1, lets it settle and
// returns how many rollouts that started.
func settledTenant(w *world, size int) int {
	w.tenant(size, v1)
	w.run(400)
	return len(w.started)
}

var (
	all5 = keysOf(5)
	fes5 = frontends(5)
)

var scenarios = []scenario{
	{name: "a new tenant is provisioned backend first",
		change: []step{newTenant(5)}, want: "be fe1 fe2 fe3 fe4"},
	{name: "a change to all nodes upgrades fe1 and fe2 before the backend",
		setup: []step{settled(5)}, change: []step{version(v2, all5...)}, want: "fe1 fe2 be fe3 fe4"},
	{name: "a change to frontends only upgrades them in number order",
		setup: []step{settled(5)}, change: []step{version(v2, fes5...)}, want: "fe1 fe2 fe3 fe4"},
	{name: "a change to the backend only rolls the backend alone",
		setup: []step{settled(5)}, change: []step{version(v2, "be")}, want: "be"},
	{name: "with fe2 down a change to all skips fe2 and closes the gap",
		setup: []step{settled(5), up("fe2", ptr.To(false)), settle}, change: []step{version(v2, all5...)}, want: "fe1 be fe3 fe4"},
	{name: "all nodes crashed come back backend first",
		setup: []step{settled(5)}, change: []step{crash(all5...)}, want: "be fe1 fe2 fe3 fe4"},
	{name: "a crashed backend recovers before a pending frontend change",
		setup: []step{settled(5)}, change: []step{version(v2, fes5...), crash("be")}, want: "be fe1 fe2 fe3 fe4"},
	{name: "crashed fe2 and fe4 recover fe2 first",
		setup: []step{settled(5)}, change: []step{crash("fe2", "fe4")}, want: "fe2 fe4"},
	{name: "a two-node tenant is provisioned be, fe1 and upgraded fe1, be",
		change: []step{newTenant(2), settle, phase, version(v2, keysOf(2)...)}, want: "be fe1 | fe1 be"},
	{name: "a twelve-node tenant upgrades fe1, fe2, be, then fe3 to fe11",
		setup: []step{settled(12)}, change: []step{version(v2, keysOf(12)...)}, ticks: 400,
		want: "fe1 fe2 be fe3 fe4 fe5 fe6 fe7 fe8 fe9 fe10 fe11"},
	{name: "a per-node version override rolls only that node",
		setup: []step{settled(5)}, change: []step{version(v2, "fe1")}, want: "fe1"},
	{name: "with fe2 toggled down mid-rollout the order is recomputed",
		setup:  []step{settled(5)},
		change: []step{version(v2, all5...), untilAStartWithoutTheClock, up("fe2", ptr.To(false)), settle, up("fe2", ptr.To(true))},
		want:   "fe1 be fe3 fe4 fe2"},
	{name: "a config-only change to all nodes upgrades fe1 and fe2 before the backend",
		setup: []step{settled(5)}, change: []step{config("changeset-2", all5...)}, want: "fe1 fe2 be fe3 fe4"},
	{name: "a change to all while fe3 is crashed rolls fe3 in its upgrade turn",
		setup: []step{settled(5)}, change: []step{crash("fe3"), version(v2, all5...)}, want: "fe1 fe2 be fe3 fe4"},
	{name: "a change to all that brings fe3 back up rolls fe3 in its upgrade turn",
		setup: []step{settled(5), up("fe3", ptr.To(false)), settle}, change: []step{changeAllUp(5)}, want: "fe1 fe2 be fe3 fe4"},
	{name: "fe3 toggled down and up in the middle of a change to all keeps its upgrade turn",
		setup:  []step{settled(5)},
		change: []step{version(v2, all5...), untilAStart, up("fe3", ptr.To(false)), ticks(2), up("fe3", nil)},
		want:   "fe1 fe2 be fe3 fe4"},
	{name: "a change to all while be is crashed rolls be first",
		setup: []step{settled(5)}, change: []step{crash("be"), version(v2, all5...)}, want: "be fe1 fe2 fe3 fe4"},
	{name: "be crashing while fe2 rolls a change to all waits for fe2",
		setup: []step{settled(5)}, change: []step{version(v2, all5...), untilStarted("fe2"), crash("be")}, want: "fe1 fe2 be fe3 fe4"},
	{name: "all pods of all nodes recreated at once recover backend first",
		setup: []step{settled(5)}, change: []step{evict(all5...)}, want: "be fe1 fe2 fe3 fe4"},
	{name: "fe3 Ready on a new target before the sequencer saw it recovers after be, fe1, fe2 when all pods are lost",
		setup:  []step{settled(5)},
		change: []step{version(v2, all5...), untilStarted("fe3"), rolledWithoutTheSequencer("fe3"), phase, evict(all5...)},
		want:   "fe1 fe2 be fe3 | be fe1 fe2 fe3 fe4 fe4"},
	{name: "pods of a rolling frontend lost together with the backend wait for it",
		setup:  []step{settled(5)},
		change: []step{version(v2, fes5...), untilAStart, phase, evict("be", "fe1"), holds("fe1", v2alpha1.ReasonRolloutPodsHeld)},
		want:   "fe1 | be fe1 fe2 fe3 fe4"},
	{name: "pods of a rolling fe2 lost together with the backend that waits for it finish the rollout first",
		setup:  []step{settled(5)},
		change: []step{version(v2, all5...), untilStarted("fe2"), phase, evict("be", "fe2")},
		want:   "fe1 fe2 | be fe2 be fe3 fe4"},
	{name: "pods of fe2 and fe4 recreated at once recover fe2 first",
		setup: []step{settled(5)}, change: []step{evict("fe2", "fe4")}, want: "fe2 fe4"},
	{name: "a node deleted while the backend waits for it leaves the order",
		setup: []step{settled(5)}, change: []step{version(v2, all5...), untilAStart, remove("fe2")}, want: "fe1 be fe3 fe4"},
	{name: "a render that brings fe3 back up with fe3 landing last after a long gap keeps its turn",
		setup:  []step{settledByRolloutID(5, "r1"), up("fe3", ptr.To(false)), func(w *world) { w.run(400) }},
		change: []step{render("r2", true, 0, "be", "fe1", "fe2", "fe4"), ticks(40), render("r2", true, 0, "fe3")},
		want:   "fe1 fe2 be fe3 fe4"},
	{name: "without rollout-id a change applied node by node is ordered as one while another change has been paused for longer than the settle cap",
		setup:  []step{settled(5), bySettleTime, paused("fe3", true), version(v2, "fe3"), ticks(90)},
		change: []step{oneByOne("changeset-2", 2, "be", "fe1", "fe2", "fe4"), untilStarted("be"), phase, paused("fe3", false)},
		want:   "fe1 fe2 be | fe3 fe4"},
	{name: "without rollout-id a change applied node by node is ordered as one while a rollout has been under way for longer than the settle cap",
		setup:  []step{settled(5), bySettleTime, stuck("fe3", true)},
		change: []step{version(v2, all5...), untilStarted("fe3"), ticks(90), phase, oneByOne("changeset-2", 2, "be", "fe1", "fe2"), untilStarted("be"), phase, stuck("fe3", false)},
		want:   "fe1 fe2 be fe3 | fe1 fe2 be | fe4"},
	{name: "without rollout-id a change applied node by node is ordered as one when its first write also unpauses be, paused for longer than the settle cap",
		setup:  []step{settled(5), bySettleTime, paused("be", true), version(v2, all5...), ticks(90)},
		change: []step{unpauseWithConfig("be", "changeset-2"), ticks(2), oneByOne("changeset-2", 2, "fe1", "fe2", "fe3", "fe4")},
		want:   "fe1 fe2 be fe3 fe4"},
	{name: "without rollout-id a change applied node by node is ordered as one when it reaches be, paused for longer than the settle cap, first",
		setup:  []step{settled(5), bySettleTime, paused("be", true), version(v2, all5...), ticks(90)},
		change: []step{config("changeset-2", "be"), ticks(1), paused("be", false), ticks(1), oneByOne("changeset-2", 2, "fe1", "fe2", "fe3", "fe4")},
		want:   "fe1 fe2 be fe3 fe4"},
	{name: "without rollout-id a frontends change applied node by node is ordered as one when its first write also unpauses fe3",
		setup:  []step{settled(5), bySettleTime, paused("fe3", true), version(v2, "fe3"), ticks(90)},
		change: []step{unpauseWithConfig("fe3", "changeset-2"), ticks(2), oneByOne("changeset-2", 2, "fe1", "fe2", "fe4")},
		want:   "fe1 fe2 fe3 fe4"},
	{name: "with rollout-id a change applied node by node without a new rollout-id is ordered as one by the settle time",
		setup:  []step{settledByRolloutID(5, "r1"), bySettleTime},
		change: []step{oneByOne("changeset-2", 2, "be", "fe1", "fe2", "fe3", "fe4")},
		want:   "fe1 fe2 be fe3 fe4"},
	{name: "a readiness blip of the backend as a change to all lands keeps the upgrade order",
		setup: []step{settled(5)}, change: []step{blip("be"), version(v2, all5...)}, want: "fe1 fe2 be fe3 fe4"},
	{name: "a readiness blip of the backend once fe1 is Ready keeps the upgrade order",
		setup: []step{settled(5)}, change: []step{version(v2, all5...), untilReady("fe1"), blip("be")}, want: "fe1 fe2 be fe3 fe4"},
	{name: "the backend's StatefulSet scaled up as a change to all lands keeps the upgrade order",
		setup: []step{settled(5)}, change: []step{scaleUp("be"), version(v2, all5...)}, want: "be fe1 fe2 be fe3 fe4"},
	{name: "the backend's pods lost and not yet recreated by its StatefulSet as a change to all lands keep the upgrade order",
		setup: []step{settled(5)}, change: []step{lose("be"), version(v2, all5...)}, want: "be fe1 fe2 be fe3 fe4"},
	{name: "the backend's pods recreated as a change to all lands keep the upgrade order",
		setup: []step{settled(5)}, change: []step{evict("be"), version(v2, all5...)}, want: "be fe1 fe2 be fe3 fe4"},
	{name: "every pod lost while fe2 rolls a change to all recovers be, fe1, fe2 in order",
		setup:  []step{settled(5)},
		change: []step{version(v2, all5...), untilStarted("fe2"), phase, evict(all5...)},
		want:   "fe1 fe2 | be fe1 fe2 be fe3 fe3 fe4 fe4"},
	{name: "the old chart's lists roll a change to all with be crashed be, fe1, fe2",
		setup: []step{oldChart(3)}, change: []step{crash("be"), version(v2, keysOf(3)...)}, want: "be fe1 fe2"},
	{name: "a crashed backend gated for a change still landing goes first once the nodes before it have landed, fe1's lost pods with it",
		setup: []step{settledByRolloutID(5, "r1")},
		change: []step{render("r2", false, 0, "be"), crash("be"), evict("fe1"), ticks(10), phase,
			render("r2", false, 0, "fe1", "fe2"), untilStarted("be"), phase, render("r2", false, 0, "fe3", "fe4")},
		want: " | be | fe1 fe1 fe2 fe3 fe4"},
	{name: "a crashed backend gated for a change to all goes first while fe1 is paused",
		setup:  []step{settled(5), paused("fe1", true)},
		change: []step{crash("be"), version(v2, all5...), untilStarted("be"), phase, paused("fe1", false)},
		want:   "be | fe1 fe2 fe3 fe4"},
	{name: "an overtaken release of fe3 taken down with the rollback keeps fe3's upgrade turn when the roll-forward brings it back up",
		setup: []step{oldChart(5), otherGate(true, "fe3"), version(v2, all5...), untilReleased("fe3"),
			rollBackTakingDown(v1, "fe3", all5...), settle, otherGate(false, "fe3")},
		change: []step{changeAllUp(5)},
		want:   "fe1 fe2 be fe3 fe4"},
	{name: "fe2 deleted and created again while it rolls a change to all rolls again before be",
		setup:  []step{settled(5)},
		change: []step{version(v2, all5...), untilStarted("fe2"), recreate("fe2")},
		want:   "fe1 fe2 fe2 be fe3 fe4"},
	{name: "a node the chart no longer renders holds no change of its tenant",
		setup:  []step{settledByRolloutID(5, "r1"), landingTimeout(30 * time.Second)},
		change: []step{renderDropping("r2", "fe4", 5), settle, phase, renderDropping("r3", "fe4", 5)},
		want:   "fe1 fe2 be fe3 | fe1 fe2 be fe3",
		ticks:  25},
	{name: "a change applied node by node with long gaps is ordered as one by rollout-id",
		setup:  []step{settledByRolloutID(5, "r1")},
		change: []step{render("r2", false, 30, all5...)},
		want:   "fe1 fe2 be fe3 fe4"},
}

func TestRolloutSequences(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			w := newWorld(t, "acme")
			assert.Equal(t, sc.want, sc.play(w), "rollout order")
			golden.Assert(t, sc.name, strings.Join(w.log, "\n")+"\n")
		})
	}
}

// The same scenarios with random rollout durations, crash recovery delays
// and operator processing orders, sequencer and operator taking turns in
// random order, and (every other seed) readiness blips of random Ready
// nodes: the order of rollouts does not change. Not Ready is not "needs a
// release".
func TestRolloutSequencesInRandomInterleavings(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			for seed := uint64(1); seed <= 25; seed++ {
				w := newWorld(t, "acme")
				w.rng = rand.New(rand.NewPCG(seed, seed*7919))
				w.blips = seed%2 == 0
				require.Equal(t, sc.want, sc.play(w), "seed %d:\n%s", seed, strings.Join(w.log, "\n"))
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
	quiet := int(landingQuiet / time.Second) // explained once the landing has lasted that long
	for range quiet {
		w.step()
	}
	assert.Equal(t, v2alpha1.ReasonChangeLanding, w.condition("fe1").Reason)
	assert.Contains(t, w.condition("fe1").Message, "acme-fe4 (r1) of 5 nodes still lack rollout-id r2")
	for range 29 - quiet {
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
