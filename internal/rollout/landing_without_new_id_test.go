package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// On a tenant whose nodes carry rollout-id, a target change that comes
// without a new rollout-id (a kubectl edit, a chart whose templates changed
// while its values did not) is grouped by the settle time; a render, which
// changes the target and the id in one write, is released the moment the
// ids agree, however quickly a render of the id alone follows it.
func TestChangesWithoutANewRolloutIDAreGroupedByTheSettleTime(t *testing.T) {
	for _, c := range []struct {
		name string
		// change is applied to the settled tenant; firstWithin and
		// firstAfter bound the ticks from its first write to the first
		// rollout of the tenant, counted once change returns (a rollout
		// that starts while it applies counts as its end).
		change                  step
		want                    string
		firstAfter, firstWithin int
		settleTime              bool
	}{
		{name: "a render is released as soon as its ids agree",
			change: render("r2", false, 0, all5...), settleTime: true, want: "fe1 fe2 be fe3 fe4", firstAfter: 0, firstWithin: 2},
		{name: "a render followed 2 s later by a render of the id alone is held no longer than the settle time of the render",
			change: func(w *world) {
				render("r2", false, 0, all5...)(w)
				w.now = w.now.Add(2 * time.Second) // no pass in between: the sequencer was busy
				renderIDOnly("r3", all5...)(w)
			},
			settleTime: true, want: "fe1 fe2 be fe3 fe4", firstAfter: 0, firstWithin: 10 - 2 + 1},
		{name: "a kubectl edit of every node, 2 s apart, is held the settle time after the last",
			change: oneByOne("changeset-2", 2, "be", "fe1", "fe2", "fe3", "fe4"), settleTime: true, want: "fe1 fe2 be fe3 fe4", firstAfter: 8 + 10, firstWithin: 8 + 12},
		{name: "without a settle time a kubectl edit is not grouped",
			change: oneByOne("changeset-2", 2, "be", "fe1", "fe2", "fe3", "fe4"), settleTime: false, want: "be fe1 fe2 fe3 fe4", firstAfter: 0, firstWithin: 10},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, "acme")
			if !c.settleTime {
				w.oracle = nil // ungrouped: each write is a change of its own, as the oracle cannot know
			}
			settledByRolloutID(5, "r1")(w)
			if c.settleTime {
				bySettleTime(w)
			}
			mark, from := len(w.started), w.tick
			c.change(w)
			first := -1
			for range 300 {
				if first < 0 && w.startedSince(mark) != "" {
					first = w.tick - from
				}
				w.step()
			}
			require.GreaterOrEqual(t, first, 0, "something rolled")
			assert.Equal(t, c.want, w.startedSince(mark), "rollout order")
			if c.firstAfter > 0 {
				assert.GreaterOrEqual(t, first, c.firstAfter, "held at least this long")
			}
			assert.LessOrEqual(t, first, c.firstWithin, "and no longer")
		})
	}
}

// renderIDOnly annotates the nodes with rollout-id id and changes nothing
// else: a render whose values changed in what these nodes do not use.
func renderIDOnly(id string, keys ...string) step {
	return func(w *world) { w.setRolloutID(id, keys...) }
}

// playGrouped runs setup, then change, lets the tenant settle and returns
// the rollouts started since the change (oracle off: it knows no grouping;
// the order itself is what is checked against DESIGN §4).
func playGrouped(t *testing.T, setup, change []step) string {
	t.Helper()
	w := newWorld(t, "acme")
	w.oracle = nil
	for _, s := range setup {
		s(w)
	}
	mark := len(w.started)
	for _, s := range change {
		s(w)
	}
	w.run(400)
	got := w.startedSince(mark)
	if got != "fe1 fe2 be fe3 fe4" {
		t.Logf("log:\n%s", strings.Join(w.log, "\n"))
	}
	return got
}

// revisionOneByOne kubectl-patches deploymentRevision of the nodes one
// after the other, gap ticks apart: a field the tenant chart does not
// render when values.deploymentRevision is "" (its default), so a Helm or
// Argo CD render leaves the edit in place (3-way merge).
func revisionOneByOne(rev string, gap int, keys ...string) step {
	return func(w *world) {
		for _, k := range keys {
			w.update(k, func(n v2alpha1.Node) { n.NodeSpec().DeploymentRevision = rev })
			ticks(gap)(w)
		}
	}
}

// A change applied node by node with kubectl (no new id), 2 s apart,
// during which a render that changes only the rollout-id lands (an Argo CD
// sync of a values change that touches no spec: commonLabels, dc; or the
// first sync with a chart whose id hashes more): the render does not end the
// hold of be's change, which is released after fe1 and fe2 as if the change
// had been applied at once.
func TestARenderOfTheIDAloneDoesNotEndTheHoldOfAKubectlEditStillLanding(t *testing.T) {
	got := playGrouped(t, []step{settledByRolloutID(5, "r1"), bySettleTime},
		[]step{config("changeset-2", "be"), ticks(2), renderIDOnly("r2", all5...), ticks(2),
			oneByOne("changeset-2", 2, "fe1", "fe2", "fe3", "fe4")})
	assert.Equal(t, "fe1 fe2 be fe3 fe4", got, "a change applied node by node, gaps < settle time: as if applied at once")
}

// The same with the edit on a field the chart does not render, so that a
// real Helm or Argo CD render does not revert it either.
func TestARenderOfTheIDAloneDoesNotEndTheHoldOfAnEditOfAFieldTheChartLeavesOut(t *testing.T) {
	got := playGrouped(t, []step{settledByRolloutID(5, "r1"), bySettleTime},
		[]step{revisionOneByOne("rev-2", 2, "be"), renderIDOnly("r2", all5...), ticks(1),
			revisionOneByOne("rev-2", 2, "fe1", "fe2", "fe3", "fe4")})
	assert.Equal(t, "fe1 fe2 be fe3 fe4", got, "a change applied node by node, gaps < settle time: as if applied at once")
}

// A kubectl apply of hand-written manifests, node by node, on a
// chart-managed tenant whose last render is older than the landing timeout:
// rollout-id was in last-applied-configuration and is not in the manifest,
// so each apply removes it while changing the target. The id changed (to
// none) in the same write, but that is no render: the nodes left without an
// id are grouped by the settle time, and be goes after fe1 and fe2.
func TestAKubectlApplyThatDropsTheRolloutIDIsGroupedByTheSettleTime(t *testing.T) {
	got := playGrouped(t, []step{settledByRolloutID(5, "r1"), func(w *world) {
		w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute, LandingTimeout: 5 * time.Minute}
	}, ticks(400)},
		[]step{func(w *world) {
			for _, k := range all5 {
				w.update(k, func(n v2alpha1.Node) {
					n.NodeSpec().ConfigChangeset = "changeset-2"
					setAnnotation(n, v2alpha1.AnnotationRolloutID, "")
				})
				ticks(2)(w)
			}
		}})
	assert.Equal(t, "fe1 fe2 be fe3 fe4", got, "a change applied node by node, gaps < settle time: as if applied at once")
}

// A kubectl edit that changes a node's order without its target — takes
// it down, or sets a prerequisite list of the user's — or a kubectl delete
// of it (dated by the webhook on the nodes that stay) gates nothing, and
// may let the nodes waiting on it go: but not before the settle time has
// grouped the edit with the rest of its apply (the node it brings up next,
// say, may be one they wait for). fe2 waits for fe1, stuck on a change;
// then the edit frees fe2.
func TestAnEditOfANodesOrderHoldsItsTenantForTheSettleTime(t *testing.T) {
	onlyBe := func(n v2alpha1.Node) {
		be := []v2alpha1.Prerequisite{defaults.Prerequisite("acme", defaults.Backend)}
		n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{ProvisioningPrerequisites: be, UpgradePrerequisites: be}
	}
	for _, c := range []struct {
		name  string
		setup step
		edit  step
	}{
		{name: "fe1 taken down, on a tenant with rollout-id, the edit bringing none", setup: settledByRolloutID(4, "r1"),
			edit: func(w *world) { w.update("fe1", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) }) }},
		{name: "fe1 taken down, on a tenant without rollout-id", setup: func(w *world) { w.tenant(4, v1); w.run(400) },
			edit: func(w *world) { w.update("fe1", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) }) }},
		{name: "fe1 deleted, on a tenant with rollout-id", setup: settledByRolloutID(4, "r1"),
			edit: func(w *world) { w.remove("fe1") }},
		{name: "fe1 deleted, on a tenant without rollout-id", setup: func(w *world) { w.tenant(4, v1); w.run(400) },
			edit: func(w *world) { w.remove("fe1") }},
		{name: "fe2's lists set to be alone, on a tenant with rollout-id, the edit bringing none", setup: settledByRolloutID(4, "r1"),
			edit: func(w *world) { w.update("fe2", onlyBe) }},
		{name: "fe2's lists set to be alone, on a tenant without rollout-id", setup: func(w *world) { w.tenant(4, v1); w.run(400) },
			edit: func(w *world) { w.update("fe2", onlyBe) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, "acme")
			c.setup(w)
			bySettleTime(w)
			w.stuck[w.name("fe1")] = true
			w.setConfig("changeset-2", "fe1", "fe2")
			for range 30 {
				w.step()
			}
			require.Equal(t, v2alpha1.ReasonWaitingForPrerequisite, w.condition("fe2").Reason, "fe2 waits for fe1, stuck: %s", w.condition("fe2").Message)
			first := ticksUntilStarted(w, "fe2", c.edit)
			require.GreaterOrEqual(t, first, 0, "fe2 rolled once the edit freed it")
			assert.GreaterOrEqual(t, first, 10, "fe2 held the settle time (10 s) after the edit")
			assert.LessOrEqual(t, first, 12, "and no longer")
		})
	}
}

// Lifting a pause frees the node as an order change does: held the settle
// time, grouped with the rest of its apply.
func TestAPauseLiftedHoldsItsTenantForTheSettleTime(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(4, v1)
	w.run(400)
	bySettleTime(w)
	paused("fe2", true)(w)
	w.setConfig("changeset-2", "fe2")
	for range 30 {
		w.step()
	}
	require.Equal(t, v2alpha1.ReasonRolloutPaused, w.condition("fe2").Reason, "fe2 paused: %s", w.condition("fe2").Message)
	first := ticksUntilStarted(w, "fe2", paused("fe2", false))
	require.GreaterOrEqual(t, first, 0, "fe2 rolled once its pause was lifted")
	assert.GreaterOrEqual(t, first, 10, "fe2 held the settle time (10 s) after the pause was lifted")
	assert.LessOrEqual(t, first, 12, "and no longer")
}

// ticksUntilStarted applies change and returns how many ticks after it
// node key's rollout started, -1 if not within a minute.
func ticksUntilStarted(w *world, key string, change step) int {
	mark, from := len(w.started), w.tick
	change(w)
	for range 60 {
		w.step()
		if strings.Contains(w.startedSince(mark), key) {
			return w.tick - from
		}
	}
	return -1
}
