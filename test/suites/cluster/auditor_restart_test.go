package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
)

// In audit nothing holds fe2: its new version starts with fe1's while the
// plan would hold it until fe1 is Ready on it. The sequencer, and the order
// auditor beside it, stop and start again before the plan lets fe2 go: the
// new auditor, which counts every pod it lists as running, finds the
// would-have-held under way in its first lists (fe2 held, a pod of its
// target made since its last release) and reports it as the plan lets fe2
// go.
func TestAWouldHaveHeldUnderWayWhenTheAuditorRestartsIsReported(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	tenants.SetMode(t, ns, v2alpha1.ModeAudit)
	replicas.set(ns, 1)
	createNodes(t, ns, 3)
	waitSettled(t, ns)
	readyAfter.set(ns, 20*time.Second) // fe1 Ready on v2 well after fe2 started and the sequencer restarted, and longer than the 5 s grace
	before, err := auditmetrics.Sum(auditmetrics.WouldHold)
	require.NoError(t, err)

	mark := time.Now()
	setVersion(t, ns, v2, "fe1", "fe2")
	require.True(t, waitFor(30*time.Second, func() bool { return strings.Contains(starts(ns, mark), "fe2") }),
		"the operator starts fe2's new version with fe1's: nothing holds it in audit (started: %s)", starts(ns, mark))
	stopSequencer()
	t.Cleanup(func() { stopSequencer(); require.NoError(t, startSequencer()) })
	fe2 := node(ns, "fe2")
	require.NoError(t, harness.Client.Get(ctx, client.ObjectKeyFromObject(fe2), fe2))
	require.NotEqual(t, fe2.GetAnnotations()[v2alpha1.AnnotationTargetHash], fe2.GetAnnotations()[v2alpha1.AnnotationReleasedTarget],
		"the plan still holds fe2 as the auditor stops")
	require.NoError(t, startSequencer())

	var cond *metav1.Condition
	require.True(t, waitFor(time.Minute, func() bool {
		if harness.Client.Get(ctx, client.ObjectKeyFromObject(fe2), fe2) != nil {
			return false
		}
		cond = meta.FindStatusCondition(fe2.NodeStatus().Conditions, v2alpha1.ConditionOrderKept)
		return cond != nil
	}), "the restarted auditor reports fe2's would-have-held")
	assert.Equal(t, v2alpha1.ReasonWouldHaveHeld, cond.Reason)
	assert.Contains(t, cond.Message, "while express-sequencer would have held it for")
	after, err := auditmetrics.Sum(auditmetrics.WouldHold)
	require.NoError(t, err)
	assert.Greater(t, after, before, "counted")
	waitSettled(t, ns)
}
