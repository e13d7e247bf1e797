package webhook_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// These webhooks run with --recheck-releases=false: they judge no release.
// A release the sequencer planned on a scoped read rests on that judgement
// (it is written as FieldManagerGuardedRelease): such a replica refuses
// it, with a cause the sequencer recognises, so that a replica rolled out
// with the guard off never lets it through unjudged. A release written as
// the sequencer's own field manager, planned on the whole tenant, goes
// through as before.
func TestAReplicaThatJudgesNoReleaseRefusesOnePlannedOnAScopedRead(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	tenant := seedTenant(ns)[:2]
	for _, n := range tenant {
		require.NoError(t, c.Create(ctx, n))
	}
	fe1 := get(t, tenant[1])
	require.True(t, fe1.NodeSpec().HasGate(v2alpha1.GateSequencer), "the webhook gates a new node")

	releaseAs := func(manager string) error {
		n := get(t, fe1)
		base := n.DeepCopyObject().(v2alpha1.Node)
		n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
		ann := n.GetAnnotations()
		ann[v2alpha1.AnnotationReleasedTarget] = ann[v2alpha1.AnnotationTargetHash]
		ann[v2alpha1.AnnotationReleasedGeneration] = fmt.Sprint(n.GetGeneration() + 1)
		return c.Patch(ctx, n, client.MergeFrom(base), client.FieldOwner(manager))
	}
	err := releaseAs(v2alpha1.FieldManagerGuardedRelease)
	require.Error(t, err, "a release planned on a scoped read is refused where no guard judges it")
	assert.True(t, apierrors.IsConflict(err), "a conflict: the sequencer plans it again (%v)", err)
	assert.True(t, apierrors.HasStatusCause(err, v2alpha1.CauseReleaseNotJudged), "the cause reaches the sequencer through the API server (%v)", err)
	assert.Contains(t, err.Error(), "--recheck-releases=false")
	assert.True(t, get(t, fe1).NodeSpec().HasGate(v2alpha1.GateSequencer), "fe1 stays gated")

	require.NoError(t, releaseAs(v2alpha1.FieldManager), "planned on the whole tenant, the release goes as it always did here")
	assert.False(t, get(t, fe1).NodeSpec().HasGate(v2alpha1.GateSequencer))

	pod := pod(ns, "acme-fe1-0", map[string]string{v2alpha1.LabelNode: "acme-fe1"})
	require.NoError(t, c.Create(ctx, pod))
	require.Equal(t, []string{v2alpha1.GateSequencer}, gates(pod), "fe1's pod waits for the Backend, which is not Ready")
	ungateAs := func(manager string) error {
		p := &corev1.Pod{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(pod), p))
		p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == v2alpha1.GateSequencer })
		return c.Update(ctx, p, client.FieldOwner(manager))
	}
	err = ungateAs(v2alpha1.FieldManagerGuardedRelease)
	require.Error(t, err, "a pod release planned on a scoped read is refused too")
	assert.True(t, apierrors.HasStatusCause(err, v2alpha1.CauseReleaseNotJudged), "with the cause (%v)", err)
	require.NoError(t, ungateAs(v2alpha1.FieldManager), "planned on the whole tenant, it goes")
}
