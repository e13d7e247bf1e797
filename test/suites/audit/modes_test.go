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
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
	"github.com/medallia/express-sequencer/test/framework/tenant"
)

const v3 = "express-e689.160"

// oldLists are the old chart's allNodeConfig for a tenant of size nodes,
// as the Express operator orders by them today: each node waits for one
// predecessor (fe1 → be, feK → fe(K−1) to provision; fe2 → fe1, be → fe2,
// fe3 → be, feK → fe(K−1) to upgrade).
func oldLists(size int) *expressoperator.Lists {
	l := &expressoperator.Lists{Provisioning: map[string][]string{}, Upgrade: map[string][]string{"be": {"fe2"}, "fe2": {"fe1"}, "fe3": {"be"}}}
	keys := tenant.Keys(size)
	for i := 1; i < size; i++ {
		l.Provisioning[keys[i]] = []string{keys[i-1]}
		if i > 3 {
			l.Upgrade[keys[i]] = []string{keys[i-1]}
		}
	}
	return l
}

var inAudit = map[string]string{v2alpha1.LabelSequencing: v2alpha1.ModeAudit}

// gated lists the nodes of ns that carry the sequencer's gate.
func gated(t *testing.T, ns string, size int) []string {
	t.Helper()
	var out []string
	for _, k := range tenant.Keys(size) {
		n := tenant.Node(ns, k)
		require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n))
		if n.NodeSpec().HasGate(v2alpha1.GateSequencer) {
			out = append(out, k)
		}
	}
	return out
}

// setAnnotation sets annotation key of n to value, or removes it when
// value is empty.
func setAnnotation(n v2alpha1.Node, key, value string) {
	ann := n.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if value == "" {
		delete(ann, key)
	} else {
		ann[key] = value
	}
	n.SetAnnotations(ann)
}

// first is the first event of node k's pods on version in ns that is Ready
// (ready) or a start (not ready), and whether there is one.
func first(ns, k, version string, ready bool) (controlplane.PodEvent, bool) {
	for _, e := range tenants.Pods.Since(ns, time.Time{}) {
		if e.Node == tenant.ClusterName+"-"+k && e.Version == version && e.Ready == ready && !e.Terminating {
			return e, true
		}
	}
	return controlplane.PodEvent{}, false
}

func TestInAuditTheOperatorOrdersAndTheAuditorShowsWhereEnforcingWouldHold(t *testing.T) {
	ns := namespace(t, expressoperator.Breakage{OrdersBy: oldLists(5)}, inAudit)
	readyAfter.Store(ns, 4*time.Second)
	violationsBefore, wouldBefore := counted(t, auditmetrics.Violations), counted(t, auditmetrics.WouldHold)

	tenants.Create(t, ns, 5, v1, nil)
	assert.Empty(t, gated(t, ns, 5), "audit gates nothing")
	tenants.WaitSettled(t, ns, 5, 2*time.Minute, nil)
	// A change to all, landed in the upgrade order (the operator orders by
	// what it sees landed: a backend changed first would start at once):
	// the old lists order it as the default does.
	tenants.SetVersion(t, ns, v2, "fe1", "fe2", "be", "fe3", "fe4")
	assert.Empty(t, gated(t, ns, 5), "audit gates nothing")
	tenants.WaitSettled(t, ns, 5, 2*time.Minute, nil)
	judged(t)
	assert.Equal(t, wouldBefore, counted(t, auditmetrics.WouldHold), "rows the old lists order as the default show nothing")
	for _, k := range tenant.Keys(5) {
		assert.Nil(t, orderKept(t, ns, k), "%s: a row ordered alike", k)
	}

	// A change to frontends only: the old lists roll FE1+FE3, then FE2+FE4;
	// enforcing would roll FE1, FE2, FE3, FE4.
	tenants.SetVersion(t, ns, v3, "fe1", "fe2", "fe3", "fe4")
	tenants.WaitSettled(t, ns, 5, 2*time.Minute, nil)
	judged(t)
	for _, k := range []string{"fe3", "fe4"} {
		cond := waitOrderKept(t, ns, k, "it started with fe1 where enforcing would have held it")
		assert.Equal(t, v2alpha1.ReasonWouldHaveHeld, cond.Reason)
		assert.Contains(t, cond.Message, "while express-sequencer would have held it for")
		assert.Contains(t, cond.Message, "it would have waited: would hold "+tenant.ClusterName+"-"+k+": waiting for")
	}
	for _, k := range []string{"be", "fe1", "fe2"} {
		assert.Nil(t, orderKept(t, ns, k), "%s went when enforcing would have let it", k)
	}
	assert.Equal(t, wouldBefore+2, counted(t, auditmetrics.WouldHold))
	assert.Equal(t, violationsBefore, counted(t, auditmetrics.Violations), "audit holds nothing, so nothing is rolled while held")
	assert.NotEmpty(t, warnings(t, ns, v2alpha1.ReasonWouldHaveHeld))
}

func TestSwitchingAuditToEnforceMidRolloutAdoptsWhatRollsAndOrdersTheRest(t *testing.T) {
	ns := namespace(t, expressoperator.Breakage{OrdersBy: oldLists(5)}, inAudit)
	violationsBefore := counted(t, auditmetrics.Violations)
	tenants.Create(t, ns, 5, v1, nil)
	tenants.WaitSettled(t, ns, 5, 2*time.Minute, nil)

	// fe1 and fe3 roll and do not become Ready until the switch has gated
	// what the operator holds behind them by its own lists (fe2, fe4): the
	// switch comes mid-rollout however long it takes to land.
	for _, k := range []string{"fe1", "fe3"} {
		builds.Stick(ns, tenant.ClusterName+"-"+k)
	}
	tenants.SetVersion(t, ns, v2, "fe1", "fe2", "fe3", "fe4")
	require.Eventually(t, func() bool {
		_, fe1 := first(ns, "fe1", v2, false)
		_, fe3 := first(ns, "fe3", v2, false)
		return fe1 && fe3
	}, 30*time.Second, 20*time.Millisecond, "the operator starts fe1 and fe3 together, by its own lists")
	tenants.SetMode(t, ns, v2alpha1.ModeEnforce)
	// fe2 and fe4 wait in the operator for fe1 and fe3: the sequencer gates
	// them first, and adopts fe1 and fe3.
	require.Eventually(t, func() bool {
		g := gated(t, ns, 5)
		return slices.Contains(g, "fe2") && slices.Contains(g, "fe4")
	}, 30*time.Second, 20*time.Millisecond, "fe2 and fe4 not gated after the switch")
	for _, k := range []string{"fe2", "fe4"} {
		_, started := first(ns, k, v2, false)
		require.False(t, started, "%s started before the switch gated it, its predecessor not Ready", k)
	}
	// Adopted where they stood: neither gated nor waiting, released for
	// the target they roll to while fe2 is gated and fe1 not Ready (no
	// release in the order could have let fe3 go).
	for _, k := range []string{"fe1", "fe3"} {
		require.Eventually(t, func() bool {
			n := tenant.Node(ns, k)
			if harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n) != nil {
				return false
			}
			return !n.NodeSpec().HasGate(v2alpha1.GateSequencer) && n.GetAnnotations()[v2alpha1.AnnotationReleasedTarget] == n.GetAnnotations()[v2alpha1.AnnotationTargetHash]
		}, 30*time.Second, 20*time.Millisecond, "%s, rolling at the switch, is adopted", k)
	}
	for _, k := range []string{"fe1", "fe3"} {
		builds.Unstick(t, harness.Client, ns, tenant.ClusterName+"-"+k)
	}
	tenants.WaitSettled(t, ns, 5, 2*time.Minute, nil)

	fe2Ready, ok := first(ns, "fe2", v2, true)
	require.True(t, ok)
	fe4Start, ok := first(ns, "fe4", v2, false)
	require.True(t, ok)
	assert.True(t, fe4Start.At.After(fe2Ready.At), "enforced, fe4 waits for fe2 (started %s, fe2 Ready %s)", fe4Start.At.Format(time.StampMilli), fe2Ready.At.Format(time.StampMilli))
	judged(t)
	assert.Equal(t, violationsBefore, counted(t, auditmetrics.Violations), "nothing rolled while gated across the switch")
	for _, k := range []string{"fe1", "fe3"} {
		n := tenant.Node(ns, k)
		require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n))
		assert.Equal(t, n.GetAnnotations()[v2alpha1.AnnotationTargetHash], n.GetAnnotations()[v2alpha1.AnnotationReleasedTarget], "%s, rolling at the switch, is adopted", k)
	}
}

func TestSwitchingEnforceToAuditMidRolloutLiftsEveryGate(t *testing.T) {
	ns := namespace(t, expressoperator.Breakage{}, nil)
	readyAfter.Store(ns, time.Second)
	violationsBefore := counted(t, auditmetrics.Violations)
	tenants.Create(t, ns, 4, v1, nil)
	tenants.WaitSettled(t, ns, 4, time.Minute, nil)
	tenants.Update(t, ns, func(n v2alpha1.Node) {
		setAnnotation(n, v2alpha1.AnnotationPauseRollout, "true")
	}, "fe2")
	tenants.SetVersion(t, ns, v2, tenant.Keys(4)...)
	require.Eventually(t, func() bool { _, ok := first(ns, "fe1", v2, true); return ok }, 30*time.Second, 20*time.Millisecond)
	assert.ElementsMatch(t, []string{"be", "fe2", "fe3"}, gated(t, ns, 4), "fe2 paused; be and fe3 behind it")

	tenants.SetMode(t, ns, v2alpha1.ModeAudit)
	require.Eventually(t, func() bool { return len(gated(t, ns, 4)) == 0 }, 10*time.Second, 20*time.Millisecond, "audit holds nothing")
	require.Eventually(t, func() bool { _, ok := first(ns, "fe2", v2, false); return ok }, 30*time.Second, 20*time.Millisecond,
		"the operator rolls fe2, paused only for express-sequencer")
	tenants.Update(t, ns, func(n v2alpha1.Node) { setAnnotation(n, v2alpha1.AnnotationPauseRollout, "") }, "fe2")
	tenants.WaitSettled(t, ns, 4, time.Minute, nil)
	judged(t)
	assert.Equal(t, violationsBefore, counted(t, auditmetrics.Violations), "a gate express-sequencer lifted is no violation")
}
