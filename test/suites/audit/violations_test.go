package audit

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
	"github.com/medallia/express-sequencer/test/framework/tenant"
)

const (
	v1 = "express-e689.151"
	v2 = "express-e689.154"

	violationsTotal = auditmetrics.Violations
)

// orderKept is node k's OrderKept condition, nil when the auditor wrote
// none.
func orderKept(t *testing.T, ns, k string) *metav1.Condition {
	t.Helper()
	n := tenant.Node(ns, k)
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n))
	return meta.FindStatusCondition(n.NodeStatus().Conditions, v2alpha1.ConditionOrderKept)
}

// waitOrderKept waits until the auditor has written node k's OrderKept
// condition, and returns it.
func waitOrderKept(t *testing.T, ns, k, why string) *metav1.Condition {
	t.Helper()
	var cond *metav1.Condition
	require.Eventually(t, func() bool {
		cond = orderKept(t, ns, k)
		return cond != nil
	}, 30*time.Second, 100*time.Millisecond, "no OrderKept condition on %s: %s", k, why)
	return cond
}

// warnings are the notes of the Events of reason in ns.
func warnings(t *testing.T, ns, reason string) []string {
	t.Helper()
	var list eventsv1.EventList
	require.NoError(t, harness.Client.List(context.Background(), &list, client.InNamespace(ns)))
	var out []string
	for _, e := range list.Items {
		if e.Reason == reason {
			assert.Equal(t, corev1.EventTypeWarning, e.Type)
			out = append(out, e.Regarding.Name+": "+e.Note)
		}
	}
	return out
}

func TestAnOperatorThatIgnoresTheGatesIsCaughtRollingAGatedNode(t *testing.T) {
	before := counted(t, violationsTotal)
	ns := namespace(t, expressoperator.Breakage{IgnoresGates: true}, nil)
	tenants.Create(t, ns, 3, v1, nil)
	// fe1 and fe2 wait for be to be Ready; the broken operator makes their
	// pods at once, while their gates hold them.
	cond := waitOrderKept(t, ns, "fe2", "rolled while gated")
	assert.Equal(t, metav1.ConditionFalse, cond.Status)
	assert.Equal(t, v2alpha1.ReasonOrderViolation, cond.Reason)
	assert.Contains(t, cond.Message, "pod acme-fe2-0 was created")
	assert.Contains(t, cond.Message, "while acme-fe2 was gated")
	assert.Contains(t, cond.Message, "the Express operator rolled a gated node")
	assert.Greater(t, counted(t, violationsTotal), before)
	require.Eventually(t, func() bool {
		return len(warnings(t, ns, v2alpha1.ReasonOrderViolation)) > 0
	}, 10*time.Second, 100*time.Millisecond)
	assert.True(t, slicesAny(warnings(t, ns, v2alpha1.ReasonOrderViolation), "acme-fe2: pod acme-fe2-0 was created"))
}

func TestAPodMadeByHandForAGatedNodesNewTargetIsCaught(t *testing.T) {
	ns := namespace(t, expressoperator.Breakage{}, nil)
	tenants.Create(t, ns, 2, v1, nil)
	tenants.WaitSettled(t, ns, 2, 60*time.Second, nil)
	judged(t)
	before := counted(t, violationsTotal)
	tenants.Update(t, ns, func(n v2alpha1.Node) {
		setAnnotation(n, v2alpha1.AnnotationPauseRollout, "true")
		n.NodeSpec().ExpressVersion = v2
	}, "fe1")
	fe1 := tenant.Node(ns, "fe1")
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(fe1), fe1))
	require.True(t, fe1.NodeSpec().HasGate(v2alpha1.GateSequencer))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: ns, Labels: map[string]string{
			v2alpha1.LabelNode: fe1.GetName(), v2alpha1.LabelTargetHash: fe1.GetAnnotations()[v2alpha1.AnnotationTargetHash],
		}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "express", Image: "express:" + v2}}},
	}
	require.NoError(t, harness.Client.Create(context.Background(), pod))
	cond := waitOrderKept(t, ns, "fe1", "a pod made by hand")
	assert.Equal(t, v2alpha1.ReasonOrderViolation, cond.Reason)
	assert.Contains(t, cond.Message, "pod by-hand, of no StatefulSet, was created")
	assert.Contains(t, cond.Message, "made by hand or outside the operator contract")
	assert.Equal(t, before+1, counted(t, violationsTotal))
	assert.Nil(t, orderKept(t, ns, "be"), "be kept the order")
}

func TestRolloutsThatKeepTheOrderCountNothing(t *testing.T) {
	before := counted(t, violationsTotal)
	ns := namespace(t, expressoperator.Breakage{}, nil)
	tenants.Create(t, ns, 4, v1, nil)
	tenants.WaitSettled(t, ns, 4, 60*time.Second, nil)
	tenants.SetVersion(t, ns, v2, tenant.Keys(4)...)
	tenants.WaitSettled(t, ns, 4, 60*time.Second, nil)
	judged(t)
	assert.Equal(t, before, counted(t, violationsTotal))
	for _, k := range tenant.Keys(4) {
		assert.Nil(t, orderKept(t, ns, k), "%s has an OrderKept condition", k)
	}
	assert.Empty(t, warnings(t, ns, v2alpha1.ReasonOrderViolation))
}

func slicesAny(notes []string, prefix string) bool {
	for _, n := range notes {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}
