package sequencer_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// A node applied by kubectl or Argo CD carries its manifest whole in
// last-applied-configuration; the cache keeps only the lists it names. A
// condition planned on the cache's copy, refused for the Express
// operator's own status write, is written once more: the node read fresh
// is alike as the plan reads it.
func TestAConditionPlannedOnTheCachesCopyOfAnAppliedNodeIsWrittenAfterTheOperatorsStatusWrite(t *testing.T) {
	h := apiServer.Get(t)
	ctx := context.Background()
	fe := createFrontend(t, h.Client, nil)
	manifest := `{"apiVersion":"express.medallia.com/v2alpha1","kind":"Frontend","spec":{"up":true,"image":"express:e1","deploymentDependencies":{"upgradePrerequisites":[]}}}`
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{"kubectl.kubernetes.io/last-applied-configuration": manifest}}})
	require.NoError(t, err)
	require.NoError(t, h.Client.Patch(ctx, fe, client.RawPatch(types.MergePatchType, patch)))
	cached, err := sequencer.StripNode(fe.DeepCopy())
	require.NoError(t, err)
	planned := cached.(*v2alpha1.Frontend)
	require.NotEqual(t, fe.Annotations, planned.Annotations, "the cache's copy is cut")

	writeOperatorStatus(t, h.Client, fe)

	r := &sequencer.Reconciler{Client: h.Client, Fresh: h.Client, Clock: clock.RealClock{}}
	retried := sequencer.ConditionConflicts("retried")
	_, err = r.ApplyConditionAndRecall(ctx, rollout.Tenant{Namespace: fe.Namespace, ClusterName: "acme"}, planned,
		rollout.Decision{Node: fe.Name, Condition: metav1.Condition{Type: v2alpha1.ConditionPrerequisitesReady, Status: metav1.ConditionTrue, Reason: v2alpha1.ReasonRolloutComplete, Message: "Ready on express-e689.151"}})
	require.NoError(t, err, "only the operator's status changed: written at the new version")
	assert.Equal(t, retried+1, sequencer.ConditionConflicts("retried"))

	stored := &v2alpha1.Frontend{}
	require.NoError(t, h.Client.Get(ctx, client.ObjectKeyFromObject(fe), stored))
	c := meta.FindStatusCondition(stored.Status.Conditions, v2alpha1.ConditionPrerequisitesReady)
	require.NotNil(t, c)
	assert.Equal(t, v2alpha1.ReasonRolloutComplete, c.Reason)
	assert.JSONEq(t, manifest, stored.Annotations["kubectl.kubernetes.io/last-applied-configuration"], "the stored manifest is whole")
}
