package rollout

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A node whose target is rewritten every 2 s (two controllers fighting over
// a field) holds a tenant without rollout-id no longer than the settle cap:
// the rest of a change to all then rolls in order while the node goes on
// changing. Without a cap it holds the tenant for as long as it changes.
func TestSettleCapBoundsTheHoldOfANodeRewrittenForever(t *testing.T) {
	for name, c := range map[string]struct {
		cap  time.Duration
		want string
	}{
		"with the cap the rest of the change rolls in order after a minute": {cap: time.Minute, want: "fe1 fe2 be fe3"},
		"without a cap nothing rolls while the node changes":                {cap: 0, want: ""},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "acme")
			mark := settledTenant(w, 5)
			w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: c.cap}
			changedAt := w.tick
			w.setVersion(v2, keysOf(5)...)
			firstStart := 0
			for i := range 150 {
				if i%2 == 0 {
					w.setConfig(fmt.Sprintf("fight-%d", i), "fe4")
				}
				w.step()
				if firstStart == 0 && w.startedSince(mark) != "" {
					firstStart = w.tick
				}
			}
			started := w.startedSince(mark)
			if c.want == "" {
				assert.Empty(t, started, "nothing rolls")
				return
			}
			assert.True(t, strings.HasPrefix(started, c.want), "rollouts %q start with %q", started, c.want)
			assert.GreaterOrEqual(t, firstStart-changedAt, int(c.cap/time.Second), "the change is held for the whole cap")
			assert.LessOrEqual(t, firstStart-changedAt, int(c.cap/time.Second)+2, "and no longer")
		})
	}
}

// A node fought over for two minutes (its configChangeset rewritten every
// 2 s) has used up its settle cap; a change to all applied then, node by
// node 1 s apart with be first, is still ordered as one by the other nodes'
// own changes — whether the fight goes on or stopped 5 s before.
func TestAChangeAppliedNodeByNodeAfterALongFightOverOneNodeIsOrderedAsOne(t *testing.T) {
	for name, fightGoesOn := range map[string]bool{"while the fight goes on": true, "after the fight stopped": false} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "acme")
			w.oracle = nil // fe4 keeps changing; the order of the others is the point
			settledTenant(w, 5)
			w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
			fight := func(on bool) {
				if on && w.tick%2 == 0 {
					w.setConfig(fmt.Sprintf("fight-%d", w.tick), "fe4")
				}
				w.step()
			}
			for range 120 {
				fight(true)
			}
			for range 5 {
				fight(fightGoesOn)
			}
			mark := len(w.started)
			for _, k := range []string{"be", "fe1", "fe2", "fe3"} {
				w.setVersion(v2, k)
				fight(fightGoesOn)
			}
			for range 150 {
				fight(fightGoesOn)
			}
			assert.Equal(t, "fe1 fe2 be fe3", w.startedExcept(mark, "fe4"), "the order of be and fe1 to fe3")
		})
	}
}

// A node rewritten every 10 or 15 s — the settle time or slower, so each
// change comes too late to continue a run by time — stays gated while the
// tenant is held (Settling), and a change of a node the settle hold still
// holds continues its run: its changes hold a backend change for the cap
// in all, each counted for as long as it held the tenant before the next
// (the webhook's settle time at most), whatever settle time the webhook
// stamped with.
func TestANodeRewrittenAtTheSettleTimeOrSlowerHoldsTheTenantNoLongerThanTheCap(t *testing.T) {
	for _, every := range []int{10, 15} {
		for _, webhookSettle := range []time.Duration{10 * time.Second, 30 * time.Second} {
			t.Run(fmt.Sprintf("every %d s, webhook settle time %s", every, webhookSettle), func(t *testing.T) {
				w := newWorld(t, "acme")
				mark := settledTenant(w, 5)
				sequencer := Grouping{SettleTime: 30 * time.Second, SettleCap: time.Minute}
				webhook := Grouping{SettleTime: webhookSettle, SettleCap: time.Minute}
				admit := func(f func()) { w.grouping = webhook; f(); w.grouping = sequencer }
				admit(func() { w.setVersion(v2, "be") })
				changedAt := w.tick
				for i := range 300 {
					if i%every == 0 {
						admit(func() { w.setConfig(fmt.Sprintf("fight-%d", i), "fe4") })
					}
					w.step()
					if strings.Contains(w.startedSince(mark), "be") {
						break
					}
				}
				assert.Contains(t, w.startedSince(mark), "be", "be's change is released")
				counted := min(time.Duration(every)*time.Second, webhookSettle)
				changes := int((time.Minute + counted - 1) / counted)
				assert.LessOrEqual(t, w.tick-changedAt, changes*every+2, "within the %d changes that spend the cap (60 s), each counted %s", changes, counted)
			})
		}
	}
}

// A change to be alone is held Settling; then the sequencer stops for two
// minutes (its leader lost) and a change to all is applied node by node, 2 s
// apart, be first. be's condition still says Settling, but the hold it
// states ended long before: be's new change begins a new run, holds the
// tenant like any other, and be rolls after fe1 and fe2 — on a tenant
// without rollout-id and with kubectl edits (no new id) on one with it.
func TestAStaleSettlingConditionLeftByAStoppedSequencerContinuesNoRun(t *testing.T) {
	for name, setup := range map[string]step{
		"without rollout-id":             settled(5),
		"with rollout-id, kubectl edits": settledByRolloutID(5, "r1"),
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "acme")
			w.oracle = nil // the oracle knows no grouping; the order is the point
			setup(w)
			bySettleTime(w)
			mark := len(w.started)
			w.setConfig("c2", "be")
			w.tick++
			w.sequence()
			require.Equal(t, v2alpha1.ReasonSettling, w.condition("be").Reason, "be's change is held")
			for range 120 { // the sequencer is stopped: only the operator and the clock run
				w.tick++
				w.now = w.now.Add(time.Second)
				w.operate()
			}
			oneByOne("c3", 2, all5...)(w)
			w.run(400)
			assert.Equal(t, "fe1 fe2 be fe3 fe4", w.startedSince(mark))
		})
	}
}

// Nodes deleted one after another, each less than the settle time after
// the one before (a scale-down whose kubectl delete waits for the
// operator's finalizer), date every node that stays each time; were each
// date part of that node's own run of changes, the run would outlast the
// settle cap, and the change applied next — be, then fe1 and fe2, a
// second apart — would hold nothing: be, its prerequisites still on their
// old target, would go first. A deletion begins a new run instead.
func TestDeletionsOneAfterAnotherDoNotUseUpTheCapOfTheNextChange(t *testing.T) {
	w := newWorld(t, "acme")
	settledTenant(w, 11)
	w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
	from := w.tick
	for _, k := range []string{"fe10", "fe9", "fe8", "fe7", "fe6", "fe5", "fe4", "fe3"} {
		w.remove(k)
		ticks(8)(w)
	}
	require.Greater(t, w.tick-from, 60, "the deletions went on for longer than the cap")
	mark := len(w.started)
	w.setVersion(v2, "be")
	w.step()
	w.setVersion(v2, "fe1")
	w.step()
	w.setVersion(v2, "fe2")
	ticks(200)(w)
	assert.Equal(t, "fe1 fe2 be", w.startedSince(mark), "the change applied after the deletions, in order")
}

// A node rewritten forever (fe5, every 2 s) beside another deleted and
// created again every 40 s (fe4, Argo CD's Replace=true,Force=true syncing
// it): each departure holds the tenant for the settle time, capped by no
// run but its own, and gives the fought node's run no new cap. A change to
// be, fe1 and fe2 then rolls, in order, between two of them.
func TestARecreatedNodeBesideOneRewrittenForeverHoldsTheTenantOnlyForTheSettleTime(t *testing.T) {
	w := newWorld(t, "acme")
	settledTenant(w, 6)
	w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
	fight := func(i int) {
		if i%2 == 1 {
			w.setConfig(fmt.Sprintf("fight-%d", w.tick), "fe5")
		}
	}
	for i := range 100 {
		fight(i)
		w.step()
	}
	mark := len(w.started)
	w.recreate("fe4")
	w.step()
	w.setVersion(v2, "be", "fe1", "fe2")
	for i := 1; i <= 300; i++ {
		fight(i)
		if i%40 == 0 {
			w.recreate("fe4")
		}
		w.step()
	}
	assert.Equal(t, "fe1 fe2 be", w.startedExcept(mark, "fe4", "fe5"), "the change rolled, in order, while fe5 was fought over and fe4 recreated")
}

// A node gated for longer than the cap (fe2, waiting for fe1, stuck) and
// held by the settle hold for another node's change (be's) begins a new
// run when it is changed again: the hold is no earlier change of its own.
// Continuing its run of two minutes before, its change held nothing, and
// once be's hold ended fe2 went ahead of fe1's change applied 7 s after
// it, in the same apply.
func TestANodeHeldByTheSettleHoldForAnotherNodesChangeBeginsANewRun(t *testing.T) {
	w := newWorld(t, "acme")
	settledTenant(w, 4)
	w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
	w.stuck[w.name("fe1")] = true
	w.setConfig("changeset-2", "fe1", "fe2")
	ticks(120)(w)
	require.Equal(t, v2alpha1.ReasonWaitingForPrerequisite, w.condition("fe2").Reason, "fe2 waits for fe1, stuck: %s", w.condition("fe2").Message)
	mark := len(w.started)
	w.setConfig("changeset-3", "be")
	ticks(2)(w)
	require.Equal(t, v2alpha1.ReasonSettling, w.condition("fe2").Reason, "fe2 held by be's change: %s", w.condition("fe2").Message)
	ticks(3)(w)
	w.setConfig("changeset-3", "fe2")
	delete(w.stuck, w.name("fe1"))
	ticks(7)(w)
	w.setConfig("changeset-3", "fe1")
	ticks(200)(w)
	assert.Equal(t, "fe1 fe2 be", w.startedSince(mark), "fe1's change before fe2's, as at once")
}

// Two nodes rewritten forever, each every 15 s (slower than the settle
// time), out of step so that one's change always falls in the other's
// hold: the hold never breaks, so each change continues its node's run,
// and the tenant is held for the cap, not for ever; a change to be, fe1
// and fe2 then rolls in order.
func TestTwoNodesRewrittenForeverOutOfStepHoldTheTenantForTheCap(t *testing.T) {
	w := newWorld(t, "acme")
	mark := settledTenant(w, 5)
	w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
	w.setVersion(v2, "be", "fe1", "fe2")
	for i := range 400 {
		switch i % 15 {
		case 0:
			w.setConfig(fmt.Sprintf("fight-%d", i), "fe3")
		case 7:
			w.setConfig(fmt.Sprintf("fight-%d", i), "fe4")
		}
		w.step()
	}
	assert.Equal(t, "fe1 fe2 be", w.startedExcept(mark, "fe3", "fe4"), "the change rolled, in order, while fe3 and fe4 were fought over")
}

// A change applied node by node, 8 s apart, to nine nodes holds the tenant
// for more than the cap; the same nodes changed again right after, be
// first, 72 s after be's first change, are a second change of be's within
// one unbroken hold, not a node rewritten forever: be's second change still
// holds the tenant for the settle time, and be rolls it out only after
// fe1 and fe2 have rolled theirs (before, its run went on from its first
// change, capped at once, and be went ahead of fe1's and fe2's second
// change).
func TestAChangeAppliedAgainRightAfterASlowApplyIsOrderedAsOne(t *testing.T) {
	w := newWorld(t, "acme")
	keys := keysOf(9)
	mark := settledTenant(w, 9)
	w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
	var lastApplied int
	for _, version := range []string{v2, "v3"} {
		for _, k := range keys {
			w.setVersion(version, k)
			lastApplied = w.tick
			ticks(8)(w)
		}
	}
	ticks(300)(w)
	first := map[string]int{}
	for i := mark; i < len(w.started); i++ {
		if w.specOfHash[w.startedTarget[i]].version == "v3" {
			if _, ok := first[w.started[i]]; !ok {
				first[w.started[i]] = w.startedAt[i]
			}
		}
	}
	require.Len(t, first, 9, "every node rolled the second change: %s", w.startedSince(mark))
	assert.Greater(t, first["be"], first["fe1"], "be's second change after fe1's")
	assert.Greater(t, first["be"], first["fe2"], "be's second change after fe2's")
	assert.Greater(t, first["be"], lastApplied, "be's second change after the last node's was applied")
}

// Three nodes rewritten forever out of step, each slower than the settle
// time, in a phase (every 12, 12 and 18 s, from 0, 8 and 9 s) where each
// change falls within the hold of another's: a change to be, fe1 and fe2
// is held while each fought-over node's changes have held the tenant for
// less than the cap, and then rolls, in order (before, the run of each
// began anew at each change seen as after a gap, and the tenant was held
// for as long as the fight went on).
func TestThreeNodesRewrittenForeverOutOfStepHoldTheTenantForTheirCaps(t *testing.T) {
	w := newWorld(t, "acme")
	w.oracle = nil // fe3 to fe5 keep changing; the order of the others is the point
	mark := settledTenant(w, 6)
	w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
	w.setVersion(v2, "be", "fe1", "fe2")
	changedAt, first := w.tick, -1
	fights := []struct {
		key         string
		every, from int
	}{{"fe3", 12, 0}, {"fe4", 12, 8}, {"fe5", 18, 9}}
	for i := range 600 {
		for _, f := range fights {
			if i >= f.from && (i-f.from)%f.every == 0 {
				w.setConfig(fmt.Sprintf("fight-%d", i), f.key)
			}
		}
		w.step()
		if first < 0 && w.startedExcept(mark, "fe3", "fe4", "fe5") != "" {
			first = w.tick - changedAt
		}
	}
	require.GreaterOrEqual(t, first, 0, "the change rolled while the fight went on: %s", w.condition("fe1").Message)
	assert.LessOrEqual(t, first, 3*60+10, "within the three nodes' caps and a settle time")
	assert.Equal(t, "fe1 fe2 be", w.startedExcept(mark, "fe3", "fe4", "fe5"), "in order")
}

// One apply, node by node: be changed, fe4 deleted 7 s later, fe2 deleted
// a second after that through a webhook replica whose clock is 5 s
// behind, fe1 changed 8 s later. The lagging replica's earlier date does
// not move the departure back: the tenant is held 10 s after fe4's, fe1's
// change lands within it, and fe1 goes before be, as at once (with the
// earlier date taken, the hold ended before fe1's change and be went
// first).
func TestADepartureDatedByAReplicaWhoseClockIsBehindDoesNotShortenTheHold(t *testing.T) {
	for _, lag := range []time.Duration{0, 5 * time.Second} {
		t.Run("clock behind by "+lag.String(), func(t *testing.T) {
			w := newWorld(t, "acme")
			mark := settledTenant(w, 5)
			w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
			w.setVersion(v2, "be")
			ticks(7)(w)
			w.remove("fe4")
			ticks(1)(w)
			real := w.now
			w.now = w.now.Add(-lag)
			w.remove("fe2")
			w.now = real
			ticks(8)(w)
			w.setVersion(v2, "fe1")
			ticks(200)(w)
			assert.Equal(t, "fe1 be", w.startedExcept(mark, "fe3"), "fe1's change, within the departure's hold, before be's")
		})
	}
}

// A change of fe4 stamped by a webhook replica whose clock ran a day
// ahead, then fe4 rewritten every 2 s by replicas with the right clock:
// its run begins anew at the first of those changes (counted from a day
// ahead, it would never reach its cap), and a change to be, fe1 and fe2
// rolls within the cap and a settle time, in order.
func TestARunStampedADayAheadIsCappedFromTheNextChange(t *testing.T) {
	w := newWorld(t, "acme")
	w.oracle = nil // fe4 keeps changing; the order of the others is the point
	mark := settledTenant(w, 5)
	w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
	real := w.now
	w.now = w.now.Add(24 * time.Hour)
	w.setConfig("ahead", "fe4")
	w.now = real
	w.setVersion(v2, "be", "fe1", "fe2")
	changedAt, first := w.tick, -1
	for i := range 400 {
		if i%2 == 0 {
			w.setConfig(fmt.Sprintf("fight-%d", i), "fe4")
		}
		w.step()
		if first < 0 && w.startedExcept(mark, "fe4") != "" {
			first = w.tick - changedAt
		}
	}
	require.GreaterOrEqual(t, first, 0, "the change rolled: %s", w.condition("fe1").Message)
	assert.LessOrEqual(t, first, 60+10, "within the cap and a settle time")
	assert.Equal(t, "fe1 fe2 be", w.startedExcept(mark, "fe4"), "in order")
}

// Seven nodes each rewritten once a minute, 9 s apart, so that the settle
// hold never breaks: each change comes a cap after the node's previous one
// and still goes on with its run, each earlier change counted for the
// settle time it held, so a change to be, fe1 and fe2 rolls once the seven
// have held the tenant for their caps, in order (a run begun anew at every
// change a cap apart held it for as long as the rewrites went on).
func TestSevenNodesRewrittenEveryMinuteHoldTheTenantForTheirCaps(t *testing.T) {
	w := newWorld(t, "acme")
	w.oracle = nil // fe3 to fe9 keep changing; the order of the others is the point
	mark := settledTenant(w, 10)
	w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
	fought := []string{"fe3", "fe4", "fe5", "fe6", "fe7", "fe8", "fe9"}
	w.setVersion(v2, "be", "fe1", "fe2")
	changedAt, first := w.tick, -1
	for i := range 1000 {
		for j, k := range fought {
			if i%60 == j*9 {
				w.setConfig(fmt.Sprintf("fight-%d", i), k)
			}
		}
		w.step()
		if first < 0 && w.startedExcept(mark, fought...) != "" {
			first = w.tick - changedAt
		}
	}
	require.GreaterOrEqual(t, first, 0, "the change rolled: %s", w.condition("fe1").Message)
	assert.LessOrEqual(t, first, 7*60+10, "within the seven nodes' caps and a settle time")
	assert.Equal(t, "fe1 fe2 be", w.startedExcept(mark, fought...), "in order")
}

// fe4 rewritten through two webhook replicas in turn, whose clocks differ
// by up to half the settle time: to each, the other's stamps lie ahead or
// behind, and a fight just faster than the settle time looks to the one
// ahead like changes the settle time apart after a hold that ended. fe4's
// run goes on all the same, and a change to be, fe1 and fe2 rolls within
// the cap, a settle time and the clocks' difference, in order (a run begun
// anew at every stamp ahead, or at every such change, never reached its
// cap, and held the tenant for as long as the rewrites went on).
func TestANodeRewrittenThroughTwoReplicasWhoseClocksDifferIsCapped(t *testing.T) {
	for _, c := range []struct {
		every int
		lag   time.Duration
	}{{2, 5 * time.Second}, {2, -5 * time.Second}, {9, time.Second}, {8, 2 * time.Second}, {5, 4 * time.Second}} {
		t.Run(fmt.Sprintf("every %d s, the second replica's clock %s off", c.every, c.lag), func(t *testing.T) {
			w := newWorld(t, "acme")
			w.oracle = nil // fe4 keeps changing; the order of the others is the point
			mark := settledTenant(w, 5)
			w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
			w.setVersion(v2, "be", "fe1", "fe2")
			changedAt, first := w.tick, -1
			for i := range 600 {
				if i%c.every == 0 {
					real := w.now
					if i/c.every%2 == 0 {
						w.now = w.now.Add(c.lag)
					}
					w.setConfig(fmt.Sprintf("fight-%d", i), "fe4")
					w.now = real
				}
				w.step()
				if first < 0 && w.startedExcept(mark, "fe4") != "" {
					first = w.tick - changedAt
				}
			}
			require.GreaterOrEqual(t, first, 0, "the change rolled: %s", w.condition("fe1").Message)
			assert.LessOrEqual(t, first, 60+10+5+c.every, "within the cap, a settle time, the clocks' difference and a change")
			assert.Equal(t, "fe1 fe2 be", w.startedExcept(mark, "fe4"), "in order")
		})
	}
}

// be changed alone six times, 12 s apart — each change settled, released
// and rolled out before the next — is no node rewritten forever: each
// change begins a run of its own, and a change to all applied right after,
// be first, rolls fe1 and fe2 before be, in any chart's lists (a run that
// went on across each 12 s gap counted every change for the settle time,
// used up be's cap and let it go first).
func TestANodeChangedNowAndThenIsNoNodeRewrittenForever(t *testing.T) {
	for name, setup := range map[string]step{"default lists": settled(5), "the old chart's lists": oldChart(5)} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "acme")
			setup(w)
			w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute}
			for i := range 6 {
				w.setConfig(fmt.Sprintf("be-tune-%d", i), "be")
				ticks(12)(w)
			}
			mark := len(w.started)
			for _, k := range all5 {
				w.setVersion(v2, k)
				w.step()
			}
			ticks(200)(w)
			assert.Equal(t, "fe1 fe2 be fe3 fe4", w.startedSince(mark))
		})
	}
}

// Renders that land at once — a new rollout-id on every node in one tick,
// be's config changed — are grouped by their id, released and rolled
// before the next: the settle hold never holds them, and they take nothing
// from the cap. Edits with no new id that follow, node by node within the
// settle time and be first, are one change (DESIGN §4): fe1, fe2, then be,
// however many renders came before and however close.
func TestRendersThatLandAtOnceTakeNothingFromTheCapOfTheEditsAfterThem(t *testing.T) {
	for _, c := range []struct{ renders, gap int }{{2, 8}, {6, 9}, {7, 9}, {8, 8}, {12, 5}} {
		t.Run(fmt.Sprintf("%d renders %d s apart", c.renders, c.gap), func(t *testing.T) {
			w := newWorld(t, "acme")
			settledByRolloutID(5, "r1")(w)
			w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute, LandingTimeout: 5 * time.Minute}
			for i := range c.renders {
				id := fmt.Sprintf("r%d", i+2)
				for _, k := range all5 {
					w.update(k, func(n v2alpha1.Node) {
						if k == "be" {
							n.NodeSpec().ConfigChangeset = id
						}
						setAnnotation(n, v2alpha1.AnnotationRolloutID, id)
					})
				}
				ticks(c.gap)(w)
			}
			mark := len(w.started)
			for _, k := range []string{"be", "fe1", "fe2"} {
				w.setVersion(v2, k)
				ticks(2)(w)
			}
			ticks(200)(w)
			assert.Equal(t, "fe1 fe2 be", w.startedSince(mark))
		})
	}
}
