package sequencer_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// The condition is applied through the typed apply configuration, and the
// API server's answer is what the reconciler holds of the node until its
// cache catches up: an explicit empty prerequisite list ("none") must stay
// empty, not turn into the default order.
func TestTheAnswerToAConditionApplyIsHeldAsStored(t *testing.T) {
	h := apiServer.Get(t)
	ctx := context.Background()
	fe := createFrontend(t, h.Client, &v2alpha1.DeploymentDependencies{
		ProvisioningPrerequisites: []v2alpha1.Prerequisite{},
		UpgradePrerequisites:      []v2alpha1.Prerequisite{},
	})

	r := &sequencer.Reconciler{Client: h.Client, Clock: clock.RealClock{}}
	d := rollout.Decision{Node: fe.Name, Gated: true, Condition: metav1.Condition{
		Type: v2alpha1.ConditionPrerequisitesReady, Status: metav1.ConditionFalse,
		Reason: v2alpha1.ReasonWaitingForPrerequisite, Message: "waiting for acme-be (Backend)",
	}}
	held, err := r.ApplyConditionAndRecall(ctx, rollout.Tenant{Namespace: fe.Namespace, ClusterName: "acme"}, fe, d)
	require.NoError(t, err)
	got, ok := held.(*v2alpha1.Frontend)
	require.True(t, ok, "held %T", held)

	stored := &v2alpha1.Frontend{}
	require.NoError(t, h.Client.Get(ctx, client.ObjectKeyFromObject(fe), stored))
	assert.Equal(t, stored.ResourceVersion, got.ResourceVersion, "the answer is the object as stored")
	require.NotNil(t, got.Spec.DeploymentDependencies)
	assert.NotNil(t, got.Spec.DeploymentDependencies.ProvisioningPrerequisites, "an explicit empty list stays explicit")
	assert.Empty(t, got.Spec.DeploymentDependencies.ProvisioningPrerequisites)
	assert.NotNil(t, got.Spec.DeploymentDependencies.UpgradePrerequisites, "an explicit empty list stays explicit")
	assert.Equal(t, stored.Spec, got.Spec)
	assert.Equal(t, stored.Annotations, got.Annotations)
	c := got.Status.Conditions
	require.Len(t, c, 1)
	assert.Equal(t, v2alpha1.ReasonWaitingForPrerequisite, c[0].Reason)
	assert.Equal(t, "waiting for acme-be (Backend)", c[0].Message)
}

// The condition is the record that a rollout converged: it is written only
// on the node as the plan read it. A write after the Express operator's
// own status write (nothing the plan reads changed) is written once more
// at the new version; a replica that read the node before the condition
// itself changed (the live replica's RolloutComplete) is refused with a
// conflict and plans again, whatever it writes — a reason from before the
// record, or a RolloutComplete of an older release.
func TestAConditionWrittenOnAStaleReadIsRefused(t *testing.T) {
	h := apiServer.Get(t)
	ctx := context.Background()
	fe := createFrontend(t, h.Client, nil)
	stale := fe.DeepCopy()

	r := &sequencer.Reconciler{Client: h.Client, Fresh: h.Client, Clock: clock.RealClock{}}
	tenant := rollout.Tenant{Namespace: fe.Namespace, ClusterName: "acme"}
	condition := func(status metav1.ConditionStatus, reason, message string) rollout.Decision {
		return rollout.Decision{Node: fe.Name, Condition: metav1.Condition{Type: v2alpha1.ConditionPrerequisitesReady, Status: status, Reason: reason, Message: message}}
	}
	complete := condition(metav1.ConditionTrue, v2alpha1.ReasonRolloutComplete, "Ready on express-e689.151")
	late := condition(metav1.ConditionFalse, v2alpha1.ReasonProgressDeadlineExceeded, "released but not Ready on express-e689.151 within 10m0s")
	reason := func() string {
		t.Helper()
		stored := &v2alpha1.Frontend{}
		require.NoError(t, h.Client.Get(ctx, client.ObjectKeyFromObject(fe), stored))
		c := meta.FindStatusCondition(stored.Status.Conditions, v2alpha1.ConditionPrerequisitesReady)
		require.NotNil(t, c)
		return c.Reason
	}

	writeOperatorStatus(t, h.Client, fe)
	retried := sequencer.ConditionConflicts("retried")
	_, err := r.ApplyConditionAndRecall(ctx, tenant, fe, complete) // the live replica's record, planned before the operator's write
	require.NoError(t, err, "only the operator's status changed: written at the new version")
	assert.Equal(t, retried+1, sequencer.ConditionConflicts("retried"))
	assert.Equal(t, v2alpha1.ReasonRolloutComplete, reason())

	// An annotation the plan read, removed since (the generation stays):
	// refused, even though the condition itself is as the plan read it.
	annotated := &v2alpha1.Frontend{}
	require.NoError(t, h.Client.Get(ctx, client.ObjectKeyFromObject(fe), annotated))
	require.NoError(t, h.Client.Patch(ctx, annotated, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+v2alpha1.AnnotationPauseRollout+`":"true"}}}`))))
	planned := annotated.DeepCopy()
	require.NoError(t, h.Client.Patch(ctx, annotated, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"`+v2alpha1.AnnotationPauseRollout+`":null}}}`))))
	refusedBefore := sequencer.ConditionConflicts("refused")
	_, err = r.ApplyConditionAndRecall(ctx, tenant, planned, condition(metav1.ConditionFalse, v2alpha1.ReasonRolloutPaused, "held by "+v2alpha1.AnnotationPauseRollout))
	require.Error(t, err, "the pause the plan read is gone")
	assert.True(t, apierrors.IsConflict(err), "%v", err)
	assert.ErrorIs(t, err, sequencer.ErrReadChanged, "planned again, not a failure")
	assert.Equal(t, refusedBefore+1, sequencer.ConditionConflicts("refused"))
	assert.Equal(t, v2alpha1.ReasonRolloutComplete, reason())
	refused := sequencer.ConditionConflicts("refused")
	_, err = r.ApplyConditionAndRecall(ctx, tenant, stale, late)
	require.Error(t, err)
	assert.Equal(t, refused+1, sequencer.ConditionConflicts("refused"), "the condition changed since the read")
	assert.True(t, apierrors.IsConflict(err), "a conflict, planned again: %v", err)
	assert.ErrorIs(t, err, sequencer.ErrReadChanged)
	assert.Equal(t, v2alpha1.ReasonRolloutComplete, reason(), "the record stands")

	stored := &v2alpha1.Frontend{}
	require.NoError(t, h.Client.Get(ctx, client.ObjectKeyFromObject(fe), stored))
	_, err = r.ApplyConditionAndRecall(ctx, tenant, stored, late)
	require.NoError(t, err, "written on the node as it is")
	assert.Equal(t, v2alpha1.ReasonProgressDeadlineExceeded, reason())

	_, err = r.ApplyConditionAndRecall(ctx, tenant, stale, complete)
	require.Error(t, err, "a late RolloutComplete too: it could replace the record of a newer release")
	assert.True(t, apierrors.IsConflict(err), "%v", err)
	assert.Equal(t, v2alpha1.ReasonProgressDeadlineExceeded, reason())
}

// createFrontend creates acme-fe1 on express-e689.151, with deps, in a
// namespace of its own.
func createFrontend(t *testing.T, c client.Client, deps *v2alpha1.DeploymentDependencies) *v2alpha1.Frontend {
	t.Helper()
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "condition-"}}
	require.NoError(t, c.Create(ctx, ns))
	fe := &v2alpha1.Frontend{
		ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Namespace: ns.Name},
		Spec: v2alpha1.NodeSpec{
			ExpressVersion: "express-e689.151", ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "acme"},
			DeploymentDependencies: deps,
		},
	}
	require.NoError(t, c.Create(ctx, fe))
	return fe
}

// writeOperatorStatus writes a condition of the Express operator's own on
// fe's status, as the operator does: a change the plan does not read.
func writeOperatorStatus(t *testing.T, c client.Client, fe *v2alpha1.Frontend) {
	t.Helper()
	operator := &v2alpha1.Frontend{
		TypeMeta:   metav1.TypeMeta{APIVersion: v2alpha1.GroupVersion.String(), Kind: v2alpha1.KindFrontend},
		ObjectMeta: metav1.ObjectMeta{Name: fe.Name, Namespace: fe.Namespace},
		Status: v2alpha1.NodeStatus{Conditions: []metav1.Condition{{
			Type: "Available", Status: metav1.ConditionTrue, Reason: "PodsReady", Message: "1/1", LastTransitionTime: metav1.Now(),
		}}},
	}
	require.NoError(t, c.Status().Patch(context.Background(), operator, client.Apply, client.FieldOwner("express-operator"), client.ForceOwnership)) //nolint:staticcheck // the operator's own apply
}
