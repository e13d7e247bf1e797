package integration

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
)

// A rollout can converge while no sequencer runs to record it, and a change
// can then gate the node again: nothing it carries says that rollout was
// done (its condition still says Released, the rollout-history keeps it
// unconverged). Found gated and Ready on the target it was released for,
// the node is recorded converged — its own entry in released-after, for the
// release it was — through the API server and its webhooks: changed back,
// it is a recovery, not a rollout under way, even if it crashes first.
func TestAGatedNodeFoundReadyOnItsReleasedTargetIsRecordedConverged(t *testing.T) {
	ns := convergedWhileNoSequencerRuns(t, 3, "fe2", "fe1 fe2")
	update(t, ns, func(n v2alpha1.Node) {
		n.GetAnnotations()[v2alpha1.AnnotationPauseRollout] = "true" // held gated, whatever else it waits for
		n.NodeSpec().ExpressVersion = "express-e689.160"
	}, "fe2")
	fe2 := read(t, ns, "fe2")
	require.True(t, v2alpha1.IsGated(fe2), "the change gates fe2")
	require.Equal(t, v2alpha1.ReasonReleased, condition(fe2).Reason, "nothing recorded the rollout complete")
	history := rollout.HistoryIn(fe2)
	require.NotEmpty(t, history)
	require.Equal(t, ptr.To(false), history[len(history)-1].Converged, "the history keeps the v2 rollout unconverged")

	before, err := auditmetrics.SumWhere("express_sequencer_convergence_records_total", nil)
	require.NoError(t, err)
	startSequencer(t)
	want := string(fe2.GetUID()) + "/" + fe2.GetAnnotations()[v2alpha1.AnnotationReleasedGeneration]
	require.Eventually(t, func() bool {
		var after map[string]string
		_ = json.Unmarshal([]byte(read(t, ns, "fe2").GetAnnotations()[v2alpha1.AnnotationReleasedAfter]), &after)
		return after["acme-fe2"] == want
	}, 30*time.Second, 50*time.Millisecond, "fe2's v2 release is recorded converged")
	assert.True(t, v2alpha1.IsGated(read(t, ns, "fe2")), "still held")
	time.Sleep(time.Second) // the passes that follow find it recorded: no second write
	after, err := auditmetrics.SumWhere("express_sequencer_convergence_records_total", nil)
	require.NoError(t, err)
	assert.Equal(t, before+1, after, "recorded once, and counted")
}
