package audit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
	"github.com/medallia/express-sequencer/test/framework/tenant"
)

// A row of DESIGN §4 with its namespace switched from one mode to the other
// while the row's change rolls.
type switchRow struct {
	name string
	// provision: the change is the tenant's creation (a new tenant).
	provision bool
	// before runs on the settled tenant, before the change: a crash, a
	// node taken down.
	before func(t *testing.T, ns string)
	// change is the row's change; after runs once the namespace is
	// switched (the rest of a change landing, a crash while it rolls).
	change, after func(t *testing.T, ns string)
	// toEnforce are the nodes whose pods have started since the change
	// when the namespace is switched from audit to enforce (none: the
	// switch comes before the change); toAudit the same for the switch
	// from enforce to audit, nil where the row is not run that way.
	toEnforce, toAudit []string
	// order is the row's order in DESIGN §4.
	order []string
}

// rowTenant is the size of every row's tenant: be, fe1 … fe4.
const rowTenant = 5

// switchRowReadyAfter is how long each pod takes to become Ready while a
// row rolls: the operator's next start comes at least this long after a
// switch that follows a start, far beyond the sequencer's reaction to the
// switch. A rollout the operator starts in the instant of the switch, before
// the sequencer's gate lands, runs on (docs/sequencer.md, "Races the design
// accepts"); no row switches there.
const switchRowReadyAfter = 3 * time.Second

func switchRows() []switchRow {
	all := tenant.Keys(rowTenant)
	frontends := all[1:]
	upgrade := []string{"fe1", "fe2", "be", "fe3", "fe4"}
	// A change to all is applied in the upgrade order: in audit the
	// operator orders by what has landed, and a backend changed first,
	// its one prerequisite not yet, would start at once (what rollout-id
	// and the sequencer's landing hold are for).
	changeAll := upgrade
	provisioning := []string{"be", "fe1", "fe2", "fe3", "fe4"}
	down := func(keys ...string) func(*testing.T, string) {
		return func(t *testing.T, ns string) {
			up := false
			tenants.Update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().Up = &up }, keys...)
			tenants.WaitSettled(t, ns, rowTenant, 2*time.Minute, nil)
		}
	}
	crash := func(keys ...string) func(*testing.T, string) {
		return func(t *testing.T, ns string) {
			var names []string
			for _, k := range keys {
				names = append(names, tenant.ClusterName+"-"+k)
			}
			require.NoError(t, cluster.Crash(context.Background(), ns, names...))
		}
	}
	mend := func(t *testing.T, ns string) { require.NoError(t, cluster.Mend(context.Background(), ns)) }
	to := func(version string, keys ...string) func(*testing.T, string) {
		return func(t *testing.T, ns string) { tenants.SetVersion(t, ns, version, keys...) }
	}
	return []switchRow{
		{name: "a new tenant", provision: true, toEnforce: []string{"be"}, toAudit: []string{"be"}, order: provisioning},
		{name: "a change to all nodes", change: to(v2, changeAll...), toEnforce: []string{"fe1"}, toAudit: []string{"fe1"}, order: upgrade},
		// The old lists start fe1 and fe3 together.
		{name: "a change to frontends only", change: to(v2, frontends...), toEnforce: []string{"fe1", "fe3"}, toAudit: []string{"fe1"}, order: []string{"fe1", "fe2", "fe3", "fe4"}},
		{name: "a config-only change to all nodes", change: func(t *testing.T, ns string) {
			tenants.Update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().ConfigChangeset = "changeset-2" }, changeAll...)
		}, toEnforce: []string{"fe1"}, toAudit: []string{"fe1"}, order: upgrade},
		// The old lists let be go with fe1: its one prerequisite, fe2, is down.
		{name: "fe2 down and a change to all", before: down("fe2"), change: to(v2, changeAll...), toEnforce: []string{"fe1", "be"}, toAudit: []string{"fe1"}, order: []string{"fe1", "be", "fe3", "fe4"}},
		{name: "a change to all while fe3 is crashed", before: crash("fe3"), change: to(v2, changeAll...), toEnforce: []string{"fe1"}, toAudit: []string{"fe1"}, order: upgrade},
		{name: "a change to all that brings fe3 back up", before: down("fe3"), change: func(t *testing.T, ns string) {
			up := true
			tenants.Update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().ExpressVersion = v2; n.NodeSpec().Up = &up }, changeAll...)
		}, toEnforce: []string{"fe1"}, toAudit: []string{"fe1"}, order: upgrade},
		// The old lists start fe1 at once; enforced, be goes first.
		{name: "a change to all while be is crashed", before: crash("be"), change: to(v2, changeAll...), toEnforce: []string{"fe1"}, toAudit: []string{"be"}, order: provisioning},
		// Enforce to audit is not run: audit rolls be at once after the
		// switch, and there is no rolling fe2 left to crash it beside.
		{name: "be crashing while fe2 rolls a change to all", change: to(v2, changeAll...), after: crash("be"), toEnforce: []string{"fe2"}, order: upgrade},
		// Mended with the change: be recovers while the old lists start fe1.
		{name: "be crashed with a change to frontends pending", before: crash("be"), change: func(t *testing.T, ns string) {
			to(v2, frontends...)(t, ns)
			mend(t, ns)
		}, toEnforce: []string{"be", "fe1"}, order: provisioning},
		// Crashed in audit, switched, then mended: recovery is ordered at the
		// pods from the switch on. (In audit nothing gates a recreated pod:
		// every node recovers at once, and a switch after would find nothing
		// left to order.)
		{name: "all nodes crashed", before: crash(all...), change: mend, order: provisioning},
		{name: "fe2 and fe4 crashed", before: crash("fe2", "fe4"), change: mend, order: []string{"fe2", "fe4"}},
		// Applied node by node: be first, which the old lists start at once;
		// the rest lands after the switch, a second apart.
		{name: "a change applied node by node with rollout-id", before: func(t *testing.T, ns string) {
			tenants.Update(t, ns, func(n v2alpha1.Node) { setAnnotation(n, v2alpha1.AnnotationRolloutID, "r1") }, all...)
			tenants.WaitSettled(t, ns, rowTenant, 2*time.Minute, nil)
		}, change: func(t *testing.T, ns string) { landR2(t, ns, "be") }, after: func(t *testing.T, ns string) {
			for _, k := range frontends {
				time.Sleep(time.Second)
				landR2(t, ns, k)
			}
		}, toEnforce: []string{"be"}, order: upgrade},
	}
}

// landR2 applies the change of render r2 to node k.
func landR2(t *testing.T, ns, k string) {
	tenants.Update(t, ns, func(n v2alpha1.Node) {
		n.NodeSpec().ExpressVersion = v2
		setAnnotation(n, v2alpha1.AnnotationRolloutID, "r2")
	}, k)
}

// Every row of DESIGN §4 holds across a switch from audit to enforce made
// while the row rolls: the Express operator orders by the old chart's
// lists while the namespace is in audit (as it does today); once enforced,
// every node that starts after the switch starts only after each node
// before it in the row's order is Ready. The auditor counts no violation.
// (A change to the backend only rolls one node: there is nothing after it
// to order. Explicit empty lists order nothing.)
func TestEveryRowHoldsAcrossASwitchFromAuditToEnforce(t *testing.T) {
	before := counted(t, auditmetrics.Violations)
	for _, row := range switchRows() {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, expressoperator.Breakage{OrdersBy: oldLists(rowTenant)}, inAudit)
			switched, mark := runAcrossTheSwitch(t, ns, row, v2alpha1.ModeEnforce, row.toEnforce)
			// Those that started before the switch were adopted.
			after := enforcedStartsInTurn(t, ns, row, switched, mark, true)
			assert.Positive(t, after, "a node started after the switch: the row was switched mid-rollout")
			assert.Empty(t, gated(t, ns, rowTenant), "enforced and settled, nothing is gated")
			noViolation(t, ns)
		})
	}
	t.Cleanup(func() {
		judged(t)
		assert.Equal(t, before, counted(t, auditmetrics.Violations), "nothing rolled while gated across the switch")
	})
}

// Every row of DESIGN §4 holds across a switch from enforce to audit: the
// nodes that started before the switch did so in the row's order, audit
// then lifts every gate and holds nothing, and the auditor counts no
// violation — a gate express-sequencer lifted is none.
func TestEveryRowHoldsAcrossASwitchFromEnforceToAudit(t *testing.T) {
	before := counted(t, auditmetrics.Violations)
	for _, row := range switchRows() {
		if row.toAudit == nil {
			continue
		}
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, expressoperator.Breakage{}, nil)
			switched, mark := runAcrossTheSwitch(t, ns, row, v2alpha1.ModeAudit, row.toAudit)
			// Those that started after the switch did so in audit, which
			// holds nothing.
			ordered := enforcedStartsInTurn(t, ns, row, switched, mark, false)
			assert.Positive(t, ordered, "a node started before the switch")
			assert.Empty(t, gated(t, ns, rowTenant), "in audit nothing is gated")
			noViolation(t, ns)
		})
	}
	t.Cleanup(func() {
		judged(t)
		assert.Equal(t, before, counted(t, auditmetrics.Violations), "a gate express-sequencer lifted is no violation")
	})
}

// enforcedStartsInTurn checks that each node of row that started while ns
// enforced — after the switch when enforcedAfter, before it otherwise —
// started after each node before it in the row's order was Ready, and
// returns how many did. Switched to enforce, every node of the row must
// have rolled.
func enforcedStartsInTurn(t *testing.T, ns string, row switchRow, switched, mark time.Time, enforcedAfter bool) int {
	t.Helper()
	when := "before"
	if enforcedAfter {
		when = "after"
	}
	var n int
	for _, k := range row.order {
		start := firstStart(ns, k, mark)
		if enforcedAfter {
			require.False(t, start.IsZero(), "%s rolled in the row", k)
		}
		if start.IsZero() || start.After(switched) != enforcedAfter {
			continue
		}
		n++
		startedInTurn(t, ns, row.order, k, mark, start, when+" the switch at "+switched.Format(time.StampMilli))
	}
	return n
}

// runAcrossTheSwitch runs row in ns, switching it to mode once the nodes of
// trigger have started since the change (before the change when there are
// none), and waits for the tenant to settle. It returns when the switch
// was made and when the change began.
func runAcrossTheSwitch(t *testing.T, ns string, row switchRow, mode string, trigger []string) (switched, mark time.Time) {
	t.Helper()
	if row.provision {
		readyAfter.Store(ns, switchRowReadyAfter)
		mark = time.Now()
		tenants.Create(t, ns, rowTenant, v1, nil)
	} else {
		tenants.Create(t, ns, rowTenant, v1, nil)
		tenants.WaitSettled(t, ns, rowTenant, 2*time.Minute, nil)
		if row.before != nil {
			row.before(t, ns)
		}
		readyAfter.Store(ns, switchRowReadyAfter)
		mark = time.Now()
		if len(trigger) == 0 {
			switched = switchTo(t, ns, mode, mark)
		}
		row.change(t, ns)
	}
	if len(trigger) > 0 {
		require.Eventually(t, func() bool {
			return !slices.ContainsFunc(trigger, func(k string) bool { return firstStart(ns, k, mark).IsZero() })
		}, time.Minute, 20*time.Millisecond, "%v start", trigger)
		switched = switchTo(t, ns, mode, mark)
	}
	if row.after != nil {
		row.after(t, ns)
	}
	tenants.WaitSettled(t, ns, rowTenant, 3*time.Minute, nil)
	return switched, mark
}

// startedInTurn asserts that node k of ns, which started at start (when:
// how it stands to the switch), did so after each node before it in order
// was Ready on its target since mark.
func startedInTurn(t *testing.T, ns string, order []string, k string, mark, start time.Time, when string) {
	t.Helper()
	for _, prev := range order[:slices.Index(order, k)] {
		assert.False(t, readyBefore(t, ns, prev, mark, start).IsZero(), "%s started at %s, %s, before %s was Ready on its target",
			k, start.Format(time.StampMilli), when, prev)
	}
}

// noViolation asserts that the auditor found no node of ns rolled out of
// order, naming what it found.
func noViolation(t *testing.T, ns string) {
	t.Helper()
	judged(t)
	for _, k := range tenant.Keys(rowTenant) {
		if c := orderKept(t, ns, k); c != nil && c.Reason == v2alpha1.ReasonOrderViolation {
			assert.Fail(t, "the auditor found "+k+" rolled while gated", c.Message)
		}
	}
}

// switchTo labels namespace ns with mode and returns when. Switched to
// enforce, the Express operator then stops ordering by its own lists, as a
// team does once express-sequencer enforces: the gates are the one hold.
// An operator that still waits for a node's upgrade list deadlocks with the
// sequencer where that wait is circular — the backend crashed with a new
// target, released by the provisioning order while the operator waits for
// fe2, which waits for the backend (docs/express-operator-contract.md §1).
// It waits for the switch to gate every node of ns that has not started
// since mark (or to record it released) first.
func switchTo(t *testing.T, ns, mode string, mark time.Time) time.Time {
	t.Helper()
	at := time.Now()
	if mode != v2alpha1.ModeEnforce {
		tenants.SetMode(t, ns, mode)
		return at
	}
	// The operator is held still while the switch lands: a rollout it
	// starts in that very instant, on a read from before the gate, runs on
	// with its pods held (docs/sequencer.md, "Races the design accepts";
	// switch_race_test.go runs it). The rows test the order across the
	// switch, not that instant. The hold cannot close it: the operator's
	// cache may show a node ungated after the gate is written, and it may
	// roll the node's current target then — which the auditor does not
	// count (a target a node carried ungated until the switch gated it).
	broken.Set(ns, expressoperator.Breakage{OrdersBy: oldLists(rowTenant), Paused: true})
	// A reconcile that began before the pause, on an ungated read, would
	// land its write after the gate: wait for it to end.
	require.Eventually(t, func() bool { return operator.Quiet(ns) }, 10*time.Second, 5*time.Millisecond, "the operator's reconciles under way end")
	tenants.SetMode(t, ns, mode)
	require.Eventually(t, func() bool {
		for _, k := range tenant.Keys(rowTenant) {
			n := tenant.Node(ns, k)
			if harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n) != nil {
				return false
			}
			ann := n.GetAnnotations()
			pending := n.NodeSpec().IsUp() && ann[v2alpha1.AnnotationTargetHash] != ann[v2alpha1.AnnotationReleasedTarget]
			if pending && firstStart(ns, k, mark).IsZero() && !n.NodeSpec().HasGate(v2alpha1.GateSequencer) {
				return false
			}
		}
		return true
	}, 20*time.Second, 20*time.Millisecond, "the switch gates every node not started yet")
	broken.Set(ns, expressoperator.Breakage{})
	return at
}

// firstStart is when the first pod of node k of ns bound to a Node since
// mark, zero if none has.
func firstStart(ns, k string, mark time.Time) time.Time {
	for _, e := range tenants.Pods.Since(ns, mark) {
		if e.Node == tenant.ClusterName+"-"+k && !e.Ready && !e.Terminating {
			return e.At
		}
	}
	return time.Time{}
}

// readyBefore is the last time since mark, before at, that a pod of node k
// of ns became Ready on the node's target as it is now (the row's target:
// the rows are checked once settled); zero if none did. (The pod log
// records a pod's readiness once, not its loss: the rows crash a node
// before it rolls, never after.)
func readyBefore(t *testing.T, ns, k string, mark, at time.Time) time.Time {
	t.Helper()
	n := tenant.Node(ns, k)
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n))
	target := n.GetAnnotations()[v2alpha1.AnnotationTargetHash]
	var last time.Time
	for _, e := range tenants.Pods.Since(ns, mark) {
		if e.Node == n.GetName() && e.Ready && e.Hash == target && e.At.Before(at) {
			last = e.At
		}
	}
	return last
}
