package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

func TestAdmissionRules(t *testing.T) {
	now := time.Date(2026, 11, 23, 8, 0, 0, 0, time.UTC)
	stored := func(edit func(n v2alpha1.Node)) v2alpha1.Node {
		n := &v2alpha1.Frontend{}
		n.SetName("acme-fe1")
		n.SetAnnotations(map[string]string{v2alpha1.AnnotationTargetHash: "stamp-on-pods", v2alpha1.AnnotationReleasedTarget: "stamp-on-pods"})
		if edit != nil {
			edit(n)
		}
		return n
	}
	// heldSettling is a node changed at last, its run begun at began, gated
	// and held by the settle hold until until, as its condition says.
	heldSettling := func(last, began, until time.Time) func(n v2alpha1.Node) {
		return func(n v2alpha1.Node) {
			changed(last, began)(n)
			n.NodeSpec().AddGate(v2alpha1.GateSequencer)
			n.NodeStatus().Conditions = []metav1.Condition{{Type: v2alpha1.ConditionPrerequisitesReady, Status: metav1.ConditionFalse, Reason: v2alpha1.ReasonSettling,
				Message: "holding for 10s after the changes to tenant acme … (nodes carry no rollout-id)" + settleReleasesAt + ceilSecond(until).Format(time.RFC3339) + " unless more changes come"}}
		}
	}
	// leftAt is a node changed an hour ago, in a run begun two hours ago,
	// on which another node's departure from the tenant is dated at left.
	leftAt := func(left time.Time) v2alpha1.Node {
		return stored(func(n v2alpha1.Node) {
			changed(now.Add(-time.Hour), now.Add(-2*time.Hour))(n)
			n.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt] = at(left)
		})
	}
	// redate writes a departure date left, naming the date replaces it
	// replaces, as the sequencer dates one ahead of its clock again.
	redate := func(left, replaces time.Time) func(n v2alpha1.Node) {
		return func(n v2alpha1.Node) {
			n.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt] = at(left)
			n.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAtReplaces] = at(replaces)
		}
	}
	for _, c := range []struct {
		name           string
		old            v2alpha1.Node
		oldHash, hash  string
		fromSequencer  bool
		edit           func(n v2alpha1.Node)
		wantGate       bool
		wantStamp      string
		wantReleased   string
		wantWarnings   int
		wantChangedNow bool
		// wantOrderChangedNow: order-changed-at stamped now.
		wantOrderChangedNow bool
		// wantBegan is the start of the node's run of target changes
		// (target-changes-began-at), "" for none.
		wantBegan string
		// wantLeft is the date another node last left the tenant
		// (node-left-tenant-at), "" for none.
		wantLeft string
	}{
		{name: "a new up node is gated and stamped", hash: "h1", wantGate: true, wantStamp: "h1", wantChangedNow: true, wantBegan: at(now)},
		{name: "a new down node is stamped and its order change dated, but not gated", hash: "h1", edit: func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) },
			wantStamp: "h1", wantOrderChangedNow: true, wantBegan: at(now)},
		{name: "a node taken down is not gated, and its order change is dated: the settle time groups it with the rest of its apply",
			old: stored(changed(now.Add(-time.Hour), now.Add(-2*time.Hour))), oldHash: "h1", hash: "h2", edit: func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) },
			wantStamp: "h2", wantReleased: "stamp-on-pods", wantOrderChangedNow: true, wantBegan: at(now)},
		{name: "an order change less than the settle time after the node's previous change continues its run of changes",
			old: stored(changed(now.Add(-5*time.Second), now.Add(-time.Minute))), oldHash: "h1", hash: "h1", edit: func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) },
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantOrderChangedNow: true, wantBegan: at(now.Add(-time.Minute))},
		{name: "a prerequisite list of the user's changed is an order change, dated",
			old: stored(changed(now.Add(-time.Hour), now.Add(-2*time.Hour))), oldHash: "h1", hash: "h1",
			edit: func(n v2alpha1.Node) {
				n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{UpgradePrerequisites: []v2alpha1.Prerequisite{defaults.Prerequisite("acme", defaults.Backend)}}
			},
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantOrderChangedNow: true, wantBegan: at(now)},
		{name: "a defaulted list refreshed to a new default order is no order change: it still reads as the nodes before it",
			old: stored(func(n v2alpha1.Node) {
				changed(now.Add(-time.Hour), now.Add(-2*time.Hour))(n)
				n.NodeSpec().ClusterConfig.ClusterName = "acme"
				defaults.Builtin().Apply(n)
			}),
			oldHash: "h1", hash: "h1",
			edit: func(n v2alpha1.Node) {
				orders, err := defaults.ParseOrders([]byte("provisioningOrder: [be]\nupgradeOrder: [be, fe1, fe2]"))
				if err != nil {
					panic(err)
				}
				orders.Apply(n)
			},
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantBegan: at(now.Add(-2 * time.Hour))},
		{name: "a pause set is an order change, dated",
			old: stored(changed(now.Add(-time.Hour), now.Add(-2*time.Hour))), oldHash: "h1", hash: "h1",
			edit:      func(n v2alpha1.Node) { n.GetAnnotations()[v2alpha1.AnnotationPauseRollout] = "true" },
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantOrderChangedNow: true, wantBegan: at(now)},
		{name: "a pause lifted is an order change, dated",
			old: stored(func(n v2alpha1.Node) {
				changed(now.Add(-time.Hour), now.Add(-2*time.Hour))(n)
				n.GetAnnotations()[v2alpha1.AnnotationPauseRollout] = "true"
			}),
			oldHash: "h1", hash: "h1", edit: func(n v2alpha1.Node) { delete(n.GetAnnotations(), v2alpha1.AnnotationPauseRollout) },
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantOrderChangedNow: true, wantBegan: at(now)},
		{name: "the date another node left the tenant, written by the sequencer, is kept as written: the tenant's change, no part of the node's run of changes",
			old: stored(changed(now.Add(-5*time.Second), now.Add(-time.Minute))), oldHash: "h1", hash: "h1", fromSequencer: true,
			edit: func(n v2alpha1.Node) {
				n.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt] = at(now.Add(-time.Millisecond))
			},
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantBegan: at(now.Add(-time.Minute)), wantLeft: at(now.Add(-time.Millisecond))},
		{name: "a date a node left the tenant written by someone other than the sequencer is put back",
			old: stored(changed(now.Add(-time.Hour), now.Add(-2*time.Hour))), oldHash: "h1", hash: "h1",
			edit:      func(n v2alpha1.Node) { n.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt] = at(now) },
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantBegan: at(now.Add(-2 * time.Hour))},
		{name: "a date a node left the tenant no later than the one stored, even the sequencer's (the node written back as read), is put back",
			old:     leftAt(now.Add(-time.Minute)),
			oldHash: "h1", hash: "h1", fromSequencer: true,
			edit: func(n v2alpha1.Node) {
				n.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt] = at(now.Add(-time.Hour))
			},
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantBegan: at(now.Add(-2 * time.Hour)), wantLeft: at(now.Add(-time.Minute))},
		{name: "an earlier date a node left the tenant, written by the sequencer over the very date it names (one ahead of its clock), replaces it, and the name is not stored",
			old:     leftAt(now.Add(24 * time.Hour)),
			oldHash: "h1", hash: "h1", fromSequencer: true,
			edit:      redate(now, now.Add(24*time.Hour)),
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantBegan: at(now.Add(-2 * time.Hour)), wantLeft: at(now)},
		{name: "an earlier date a node left the tenant, written by the sequencer over the very date it names, is taken no earlier than the webhook's now: a departure admitted before it stays held",
			old:     leftAt(now.Add(24 * time.Hour)),
			oldHash: "h1", hash: "h1", fromSequencer: true,
			edit:      redate(now.Add(-2*time.Second), now.Add(24*time.Hour)),
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantBegan: at(now.Add(-2 * time.Hour)), wantLeft: at(now)},
		{name: "an earlier date a node left the tenant, written by the sequencer without naming the date it replaces (a dater whose clock is behind), is put back, even over one ahead of the webhook's clock",
			old:     leftAt(now.Add(24 * time.Hour)),
			oldHash: "h1", hash: "h1", fromSequencer: true,
			edit:      func(n v2alpha1.Node) { n.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt] = at(now) },
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantBegan: at(now.Add(-2 * time.Hour)), wantLeft: at(now.Add(24 * time.Hour))},
		{name: "an earlier date a node left the tenant written by someone other than the sequencer is put back, even naming the date it replaces",
			old:     leftAt(now.Add(24 * time.Hour)),
			oldHash: "h1", hash: "h1",
			edit:      redate(now, now.Add(24*time.Hour)),
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantBegan: at(now.Add(-2 * time.Hour)), wantLeft: at(now.Add(24 * time.Hour))},
		{name: "an earlier date a node left the tenant, written by the sequencer naming another date than the one stored (a later departure dated meanwhile), is put back",
			old:     leftAt(now.Add(24 * time.Hour)),
			oldHash: "h1", hash: "h1", fromSequencer: true,
			edit:      redate(now, now.Add(23*time.Hour)),
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantBegan: at(now.Add(-2 * time.Hour)), wantLeft: at(now.Add(24 * time.Hour))},
		{name: "a node that stays down moved to another tenant is an order change of the tenant it joins, dated",
			old: stored(func(n v2alpha1.Node) {
				changed(now.Add(-time.Hour), now.Add(-2*time.Hour))(n)
				n.NodeSpec().Up = ptr.To(false)
				n.NodeSpec().ClusterConfig.ClusterName = "acmee"
			}),
			oldHash: "h1", hash: "h2", edit: func(n v2alpha1.Node) { n.NodeSpec().ClusterConfig.ClusterName = "acme" },
			wantStamp: "h2", wantReleased: "stamp-on-pods", wantOrderChangedNow: true, wantBegan: at(now)},
		{name: "a target change of a node that stays down is not dated: the nodes after it walk through it to lists it keeps",
			old: stored(func(n v2alpha1.Node) {
				changed(now.Add(-5*time.Second), now.Add(-time.Minute))(n)
				n.NodeSpec().Up = ptr.To(false)
			}),
			oldHash: "h1", hash: "h2", edit: func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) },
			wantStamp: "h2", wantReleased: "stamp-on-pods", wantBegan: at(now.Add(-time.Minute))},
		{name: "an unchanged target keeps the stamp its pods carry even if hashing now gives another value",
			old: stored(nil), oldHash: "rehashed", hash: "rehashed", wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods"},
		{name: "a changed target is gated and stamped anew", old: stored(nil), oldHash: "h1", hash: "h2",
			wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now)},
		{name: "a target change less than the settle time after the node's previous one continues its run of changes",
			old:     stored(changed(now.Add(-9*time.Second), now.Add(-time.Minute))),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now.Add(-time.Minute))},
		{name: "a target change less than the settle time after a render that came with its own rollout-id goes on with its run, the whole gap uncounted: the settle hold never held the render",
			old:     stored(changedWithID(now.Add(-5*time.Second), now.Add(-50*time.Second), now.Add(-5*time.Second))),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now.Add(-45 * time.Second))},
		{name: "a target change an hour after a render that ended a long run, not held, begins a new run: the render rule does not keep a run across a gap the settle time would not",
			old:     stored(changedWithID(now.Add(-time.Hour), now.Add(-time.Hour-2*time.Minute), now.Add(-time.Hour))),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now)},
		{name: "a target change less than the settle time after an edit that came without a new rollout-id continues its run as on a tenant without ids",
			old:     stored(changedWithID(now.Add(-5*time.Second), now.Add(-50*time.Second), now.Add(-20*time.Second))),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now.Add(-50 * time.Second))},
		{name: "a target change the settle time or more after the node's previous one, not held, begins a new run of changes",
			old:     stored(changed(now.Add(-10*time.Second), now.Add(-time.Minute))),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now)},
		{name: "a target change of a node whose Settling condition says its hold ended less than half the settle time ago (a replica whose clock runs ahead) continues its run, the previous change counted for the settle time only",
			old:     stored(heldSettling(now.Add(-12*time.Second), now.Add(-time.Minute), now.Add(-3*time.Second))),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now.Add(-58 * time.Second))},
		{name: "a target change of a node the settle hold still holds, less than the cap after its previous one, continues its run of changes: the start moves on by the part of the gap the previous change did not hold",
			old:     stored(heldSettling(now.Add(-30*time.Second), now.Add(-40*time.Second), now.Add(5*time.Second))),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now.Add(-20 * time.Second))},
		{name: "a target change of a node the settle hold holds for another node's change, long after its own last change, continues its run by what its own changes held: its change holds the tenant",
			old:     stored(heldSettling(now.Add(-50*time.Second), now.Add(-50*time.Second), now.Add(5*time.Second))),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now.Add(-10 * time.Second))},
		{name: "a target change in the last fraction of a second of the settle hold that holds the node continues its run: the hold's end is stated rounded up to the second, and a change before it is made while the hold holds",
			old:     stored(heldSettling(now.Add(-10300*time.Millisecond), now.Add(-10300*time.Millisecond), now.Add(400*time.Millisecond))),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now.Add(-10 * time.Second))},
		{name: "a target change of a node the settle hold holds, however long after its previous one, continues its run of changes: a run of an hour before it has held the tenant for more than the cap",
			old:     stored(heldSettling(now.Add(-time.Hour), now.Add(-2*time.Hour), now.Add(5*time.Second))),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now.Add(-time.Hour - 10*time.Second))},
		{name: "a target change of a node whose previous change and run are dated ahead of the webhook's clock (another replica's clock runs ahead) goes on with its run, its start taken as now: counted from a time to come, the run would never reach its cap",
			old:     stored(heldSettling(now.Add(24*time.Hour), now.Add(24*time.Hour), now.Add(24*time.Hour+10*time.Second))),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now)},
		{name: "a target change of a node whose previous change is dated 5 s ahead of the webhook's clock goes on with its run from where it began",
			old:     stored(changed(now.Add(5*time.Second), now.Add(-20*time.Second))),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now.Add(-20 * time.Second))},
		{name: "a target change of a node whose settle hold ended while the sequencer was stopped begins a new run of changes",
			old:     stored(heldSettling(now.Add(-time.Hour), now.Add(-2*time.Hour), now.Add(-50*time.Minute))),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now)},
		{name: "a target change of a node held by a pause for an earlier one begins a new run of changes",
			old: stored(func(n v2alpha1.Node) {
				changed(now.Add(-time.Hour), now.Add(-2*time.Hour))(n)
				n.NodeSpec().AddGate(v2alpha1.GateSequencer)
				n.NodeStatus().Conditions = []metav1.Condition{{Type: v2alpha1.ConditionPrerequisitesReady, Status: metav1.ConditionFalse, Reason: v2alpha1.ReasonRolloutPaused}}
			}),
			oldHash: "h1", hash: "h2", wantGate: true, wantStamp: "h2", wantReleased: "stamp-on-pods", wantChangedNow: true, wantBegan: at(now)},
		{name: "an update that keeps the target keeps the run of changes and ignores a hand-written start",
			old:     stored(changed(now.Add(-time.Hour), now.Add(-2*time.Hour))),
			edit:    func(n v2alpha1.Node) { n.GetAnnotations()[v2alpha1.AnnotationTargetChangesBeganAt] = at(now) },
			oldHash: "h1", hash: "h1", wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantBegan: at(now.Add(-2 * time.Hour))},
		{name: "a render whose rendered-nodes names no node is admitted with a warning: it is no list",
			old: stored(nil), oldHash: "h1", hash: "h1",
			edit:      func(n v2alpha1.Node) { n.GetAnnotations()[v2alpha1.AnnotationRenderedNodes] = " , " },
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantWarnings: 1},
		{name: "a node whose stored rendered-nodes names no node, written again as it is, is admitted without the warning again",
			old: stored(func(n v2alpha1.Node) { n.GetAnnotations()[v2alpha1.AnnotationRenderedNodes] = " , " }), oldHash: "h1", hash: "h1",
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods"},
		{name: "a hand-written released-target is dropped with a warning", old: stored(nil), oldHash: "h1", hash: "h1",
			edit:      func(n v2alpha1.Node) { n.GetAnnotations()[v2alpha1.AnnotationReleasedTarget] = "forged" },
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantWarnings: 1},
		{name: "the sequencer records its release", old: stored(nil), oldHash: "h1", hash: "h1", fromSequencer: true,
			edit:      func(n v2alpha1.Node) { n.GetAnnotations()[v2alpha1.AnnotationReleasedTarget] = "h1" },
			wantStamp: "stamp-on-pods", wantReleased: "h1"},
		{name: "a node that predates the sequencer is adopted",
			old:     stored(func(n v2alpha1.Node) { n.SetAnnotations(nil) }),
			oldHash: "h1", hash: "h1", wantStamp: "h1", wantReleased: "h1"},
		{name: "a node created down and never released is not adopted on its next update",
			old: stored(func(n v2alpha1.Node) {
				delete(n.GetAnnotations(), v2alpha1.AnnotationReleasedTarget)
				n.NodeSpec().Up = ptr.To(false)
			}),
			oldHash: "h1", hash: "h1", edit: func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) }, wantStamp: "stamp-on-pods"},
		{name: "a gate removed by someone else is put back with a warning",
			old:     stored(func(n v2alpha1.Node) { n.NodeSpec().AddGate(v2alpha1.GateSequencer) }),
			oldHash: "h1", hash: "h1", wantGate: true, wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantWarnings: 1},
		{name: "a released node written back with the gate it no longer has (kubectl get -o yaml applied again) is not gated again, with a warning",
			old: stored(nil), oldHash: "h1", hash: "h1", edit: func(n v2alpha1.Node) { n.NodeSpec().AddGate(v2alpha1.GateSequencer) },
			wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods", wantWarnings: 1},
		{name: "a new down node written with the gate is not gated, with a warning",
			hash: "h1", edit: func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false); n.NodeSpec().AddGate(v2alpha1.GateSequencer) },
			wantStamp: "h1", wantWarnings: 1, wantOrderChangedNow: true, wantBegan: at(now)},
		{name: "the sequencer's own write keeps a gate it adds", old: stored(nil), oldHash: "h1", hash: "h1", fromSequencer: true,
			edit: func(n v2alpha1.Node) { n.NodeSpec().AddGate(v2alpha1.GateSequencer) }, wantGate: true, wantStamp: "stamp-on-pods", wantReleased: "stamp-on-pods"},
		{name: "a node being deleted is never gated", old: stored(nil), oldHash: "h1", hash: "h2",
			edit:      func(n v2alpha1.Node) { n.SetDeletionTimestamp(&metav1.Time{Time: now}) },
			wantStamp: "h2", wantReleased: "stamp-on-pods"},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := v2alpha1.Node(&v2alpha1.Frontend{})
			if c.old != nil {
				n = c.old.DeepCopyObject().(v2alpha1.Node)
				n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
			}
			if c.edit != nil {
				c.edit(n)
			}
			warnings := Admit(n, Admission{Old: c.old, OldHash: c.oldHash, Hash: c.hash, FromSequencer: c.fromSequencer, Now: now, SettleTime: 10 * time.Second})
			assert.Equal(t, c.wantGate, Gated(n), "gated")
			assert.Equal(t, c.wantStamp, StampedTarget(n), "target-hash")
			assert.Equal(t, c.wantReleased, ReleasedTarget(n), "released-target")
			assert.Len(t, warnings, c.wantWarnings, "%v", warnings)
			changed := n.GetAnnotations()[v2alpha1.AnnotationTargetChangedAt] == now.Format(time.RFC3339Nano)
			assert.Equal(t, c.wantChangedNow, changed, "target-changed-at stamped now")
			orderChanged := n.GetAnnotations()[v2alpha1.AnnotationOrderChangedAt] == now.Format(time.RFC3339Nano)
			assert.Equal(t, c.wantOrderChangedNow, orderChanged, "order-changed-at stamped now")
			assert.Equal(t, c.wantBegan, n.GetAnnotations()[v2alpha1.AnnotationTargetChangesBeganAt], "target-changes-began-at")
			assert.Equal(t, c.wantLeft, n.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt], "node-left-tenant-at")
		})
	}
}

func at(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) }

// changedWithID records a node's last target change at last, in a run of
// changes that began at began, on a node carrying rollout-id r1, taken at
// idAt: a render when idAt is last.
func changedWithID(last, began, idAt time.Time) func(n v2alpha1.Node) {
	return func(n v2alpha1.Node) {
		changed(last, began)(n)
		n.GetAnnotations()[v2alpha1.AnnotationRolloutID] = "r1"
		n.GetAnnotations()[v2alpha1.AnnotationRolloutIDChangedAt] = at(idAt)
	}
}

// changed records a node's last target change at last, in a run of changes
// that began at began.
func changed(last, began time.Time) func(n v2alpha1.Node) {
	return func(n v2alpha1.Node) {
		n.GetAnnotations()[v2alpha1.AnnotationTargetChangedAt] = at(last)
		n.GetAnnotations()[v2alpha1.AnnotationTargetChangesBeganAt] = at(began)
	}
}
