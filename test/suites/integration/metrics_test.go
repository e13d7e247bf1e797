package integration

import (
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

func metric(t *testing.T, name string) []*dto.Metric {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()
		}
	}
	return nil
}

func gatedWaiting(t *testing.T) float64 {
	for _, m := range metric(t, "express_sequencer_gated_nodes") {
		for _, l := range m.GetLabel() {
			if l.GetName() == "reason" && l.GetValue() == "WaitingForPrerequisite" {
				return m.GetGauge().GetValue()
			}
		}
	}
	return 0
}

// steps counts the observations of express_sequencer_release_step_seconds
// by step.
func steps(t *testing.T) map[string]uint64 {
	out := map[string]uint64{}
	for _, m := range metric(t, "express_sequencer_release_step_seconds") {
		for _, l := range m.GetLabel() {
			if l.GetName() == "step" {
				out[l.GetValue()] = m.GetHistogram().GetSampleCount()
			}
		}
	}
	return out
}

// admissionSteps counts the observations of
// express_sequencer_admission_step_seconds by webhook and step.
func admissionSteps(t *testing.T) map[string]uint64 {
	out := map[string]uint64{}
	for _, m := range metric(t, "express_sequencer_admission_step_seconds") {
		var webhook, step string
		for _, l := range m.GetLabel() {
			switch l.GetName() {
			case "webhook":
				webhook = l.GetValue()
			case "step":
				step = l.GetValue()
			}
		}
		out[webhook+" "+step] = m.GetHistogram().GetSampleCount()
	}
	return out
}

func TestTheSequencerExportsGatesReleasesAndLatency(t *testing.T) {
	startSequencer(t)
	ns := namespace(t)
	createTenant(t, ns, 5, nil)
	waitSettled(t, ns, 5)

	before := metric(t, "express_sequencer_release_latency_seconds")
	require.Len(t, before, 1)
	count := before[0].GetHistogram().GetSampleCount()
	stepsBefore, admissionBefore := steps(t), admissionSteps(t)

	setVersion(t, ns, v2, keys(5)...)
	assert.True(t, waitFor(10*time.Second, func() bool { return gatedWaiting(t) > 0 }), "nodes waiting in line are counted")
	waitSettled(t, ns, 5)

	after := metric(t, "express_sequencer_release_latency_seconds")
	// fe1 is released when the settle time is over; the others the moment
	// their prerequisite's pod turns Ready, and those releases are timed.
	assert.GreaterOrEqual(t, after[0].GetHistogram().GetSampleCount(), count+4, "every release triggered by a change is timed")
	assert.Equal(t, float64(0), gatedWaiting(t), "no node waits once the rollout is done")
	released := 0.0
	for _, m := range metric(t, "express_sequencer_releases_total") {
		released += m.GetCounter().GetValue()
	}
	assert.GreaterOrEqual(t, released, 10.0, "provisioning and upgrade releases are counted")
	stepsAfter := steps(t)
	for _, step := range []string{"queue", "plan", "fresh_read", "records", "release", "rest"} {
		assert.GreaterOrEqual(t, stepsAfter[step], stepsBefore[step]+4, "every reconcile that releases times its %s step", step)
	}
	admissionAfter := admissionSteps(t)
	for _, step := range []string{"fresh_read", "decide"} {
		// Each of the 5 releases is judged again as it is written, and each
		// node's new pod is admitted by the pod webhook.
		assert.GreaterOrEqual(t, admissionAfter["release-guard "+step], admissionBefore["release-guard "+step]+5, "every release judged again times its %s step", step)
		assert.GreaterOrEqual(t, admissionAfter["pods "+step], admissionBefore["pods "+step]+5, "every Express pod admitted times its %s step", step)
	}
}
