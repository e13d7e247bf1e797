package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// reconciles is the sequencer's count of tenant reconciles that ended in
// result (controller-runtime's controller_runtime_reconcile_total).
func reconciles(t *testing.T, result string) float64 {
	return counter(t, "controller_runtime_reconcile_total", map[string]string{"controller": "sequencer", "result": result})
}

// etcd stops answering for 10 s (SIGSTOP) while a change to all nodes
// rolls, fe1 released: every read and write that reaches it waits. An
// Express pod created meanwhile is refused by the pod webhook in its own
// words before its timeoutSeconds (the API server would otherwise cut the
// call short with no word of why). The sequencer's reads wait rather than
// fail, so it does not retry in a storm; etcd resumes and the change goes
// on in its order: fe1, fe2, be, fe3, each after the last was Ready.
func TestAnEtcdStalledForTenSecondsMidRolloutHoldsTheOrderWithoutARetryStorm(t *testing.T) {
	ctx := context.Background()
	ns := settledTenant(t, 4, 1)
	mark := time.Now()
	setVersion(t, ns, v2, keys(4)...)
	waitReleased(t, ns, "fe1")
	errorsBefore, successesBefore := reconciles(t, "error"), reconciles(t, "success")

	resume, err := harness.StallEtcd()
	require.NoError(t, err)
	stalled := time.Now()
	resumed := false
	defer func() {
		if !resumed {
			assert.NoError(t, resume())
		}
	}()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "by-hand-", Namespace: ns, Labels: map[string]string{v2alpha1.LabelNode: "acme-fe3"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "express", Image: "express:" + v2}}},
	}
	create, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = harness.Client.Create(create, pod, client.DryRunAll)
	cancel()
	if assert.Error(t, err, "no pod is admitted on a read etcd did not answer") {
		assert.Contains(t, err.Error(), "did not answer the fresh read of acme-fe3's tenant", "the pod webhook says what happened")
		t.Logf("an Express pod created during the stall: %v", err)
	}
	time.Sleep(10*time.Second - time.Since(stalled))
	require.NoError(t, resume())
	resumed = true

	waitSettled(t, ns)
	assert.Equal(t, "fe1 fe2 be fe3", starts(ns, mark))
	eachAfterTheLast(t, ns, mark, "fe1", "fe2", "be", "fe3")
	failed, done := reconciles(t, "error")-errorsBefore, reconciles(t, "success")-successesBefore
	t.Logf("sequencer reconciles from the stall to the settled tenant: %.0f failed, %.0f succeeded", failed, done)
	assert.LessOrEqual(t, failed, 20.0, "the sequencer backs off, it does not retry in a storm")
}
