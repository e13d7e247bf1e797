package audit

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
	"github.com/medallia/express-sequencer/test/framework/tenant"
)

// The crash rows where the old chart's lists order otherwise than the
// default (docs/migrating-from-allnodeconfig.md), in audit with the operator
// ordering by the old lists as it does today: the nodes it starts while the
// Backend is down show as would-have-held, each with how long enforcing
// would have held it; the Backend, which enforcing releases first, shows
// nothing. (A node the two orders start within the auditor's grace of each
// other is not asserted either way.)
func TestInAuditTheOldListsCrashRowsShowWhereEnforcingWouldHold(t *testing.T) {
	// Each pod takes this long to become Ready: every asserted hold lasts
	// about one such wait or more (fe1 and fe3 of the second row, about
	// one each), twice the auditor's grace.
	const readyIn = 4 * time.Second
	rows := []struct {
		name string
		// change is made on the settled tenant with be crashed.
		change func(t *testing.T, ns string)
		// held are the nodes the operator starts before enforcing would
		// let them go, by about readyIn or more.
		held []string
	}{
		// The old lists start fe1 at once and fe2 after it; enforcing
		// releases be first (the provisioning order breaks the circular
		// wait) and each frontend after it.
		{name: "a change to all while be is crashed", change: func(t *testing.T, ns string) {
			tenants.SetVersion(t, ns, v2, "fe1", "fe2", "be", "fe3", "fe4")
		}, held: []string{"fe1", "fe2"}},
		// be is mended with the change: the old lists start fe1 at once
		// and fe3 once be is Ready; enforcing waits for be, then fe1, fe2,
		// fe3 in turn.
		{name: "be crashed with a change to frontends pending", change: func(t *testing.T, ns string) {
			tenants.SetVersion(t, ns, v2, "fe1", "fe2", "fe3", "fe4")
			require.NoError(t, cluster.Mend(context.Background(), ns))
		}, held: []string{"fe1", "fe3"}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			ns := namespace(t, expressoperator.Breakage{OrdersBy: oldLists(5)}, inAudit)
			readyAfter.Store(ns, readyIn)
			tenants.Create(t, ns, 5, v1, nil)
			tenants.WaitSettled(t, ns, 5, 2*time.Minute, nil)
			require.NoError(t, cluster.Crash(context.Background(), ns, tenant.ClusterName+"-be"))
			row.change(t, ns)
			assert.Empty(t, gated(t, ns, 5), "audit gates nothing")
			tenants.WaitSettled(t, ns, 5, 3*time.Minute, nil)
			judged(t)
			for _, k := range row.held {
				cond := waitOrderKept(t, ns, k, "the old lists started it while enforcing would have held it")
				assert.Equal(t, v2alpha1.ReasonWouldHaveHeld, cond.Reason, k)
				assert.Contains(t, cond.Message, "while express-sequencer would have held it for", k)
				assert.Contains(t, cond.Message, "it would have waited: would hold "+tenant.ClusterName+"-"+k+": waiting for", k)
				t.Logf("%s: %s", k, cond.Message)
			}
			assert.Nil(t, orderKept(t, ns, "be"), "be went when enforcing would have let it")
			noViolation(t, ns)
			assert.NotEmpty(t, warnings(t, ns, v2alpha1.ReasonWouldHaveHeld))
		})
	}
}

// The fourth row, fe2 and fe4 crashed, is a recovery: in audit nothing
// holds a pod, and their StatefulSets bring both back at once, where
// enforcing brings fe2 back first (fe4 provisions after fe2). The pod
// webhook notes on fe4's new pod what enforcing would have held it for,
// the sequencer when its plan would have let it go, and the auditor
// reports the recovery as would-have-held; fe2 shows nothing.
func TestInAuditTwoFrontendsCrashedShowWhereEnforcingWouldHoldTheRecovery(t *testing.T) {
	const readyIn = 4 * time.Second // fe2's new pod: the hold fe4 would have had, twice the grace
	ns := namespace(t, expressoperator.Breakage{OrdersBy: oldLists(5)}, inAudit)
	readyAfter.Store(ns, readyIn)
	tenants.Create(t, ns, 5, v1, nil)
	tenants.WaitSettled(t, ns, 5, 2*time.Minute, nil)
	ctx := context.Background()
	fe2, fe4 := tenant.ClusterName+"-fe2", tenant.ClusterName+"-fe4"
	require.NoError(t, cluster.Crash(ctx, ns, fe2, fe4))
	require.NoError(t, cluster.Mend(ctx, ns))
	tenants.WaitSettled(t, ns, 5, 3*time.Minute, nil)
	judged(t)

	cond := waitOrderKept(t, ns, "fe4", "fe4's new pod started while enforcing would have held it")
	assert.Equal(t, v2alpha1.ReasonWouldHaveHeld, cond.Reason)
	assert.Contains(t, cond.Message, fe4+" recovered: its new pod "+fe4+"-0")
	assert.Contains(t, cond.Message, "would have held it scheduling-gated for")
	assert.Contains(t, cond.Message, "waiting for "+fe2+" (Frontend)")
	t.Logf("fe4: %s", cond.Message)
	assert.Nil(t, orderKept(t, ns, "fe2"), "fe2 came back when enforcing would have let it")

	var pod corev1.Pod
	require.NoError(t, harness.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: fe4 + "-0"}, &pod))
	assert.Empty(t, pod.Spec.SchedulingGates, "audit holds no pod")
	assert.Contains(t, pod.Annotations[v2alpha1.AnnotationWouldHoldPod], "waiting for "+fe2)
	assert.NotEmpty(t, pod.Annotations[v2alpha1.AnnotationWouldReleaseAt], "the plan said when it would let it go")
	noViolation(t, ns)
}
