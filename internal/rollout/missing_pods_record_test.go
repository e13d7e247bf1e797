package rollout

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// reconcile chooses its plan as sequencer.Reconciler.plan does
// (PlanOnFreshest): on the cache, which knows no StatefulSet (MissingPods
// nil), or on fresh reads, which do; and applies that plan.
func (w *world) reconcile() {
	cached := w.snapshot()
	cached.MissingPods, cached.SetsConverged, cached.SetRevisions = nil, nil, nil
	_, decisions, _, err := PlanOnFreshest(cached, func() (*Snapshot, error) { return w.snapshot(), nil })
	if err != nil {
		w.t.Fatal(err)
	}
	w.apply(decisions)
}

func (w *world) reconcileStep() {
	w.tick++
	w.now = w.now.Add(time.Second)
	w.reconcile()
	w.operate()
}

// fe2's StatefulSet wants two pods; be is paused, so no pass releases
// anything while fe2's first new pod becomes Ready and its second does not
// exist yet. No RolloutComplete is recorded for fe2 then: be crashes, fe2's
// second pod is created as part of fe2's rollout, not held as a recovery
// for be, and be, unpaused, goes on the new target only after fe2 is Ready
// on it (DESIGN §4: be crashing while fe2 rolls a change to all).
func TestARolloutCompleteIsNotRecordedWhileTheStatefulSetStillWantsAPod(t *testing.T) {
	w := newWorld(t, "acme")
	w.oracle = nil
	settledTenant(w, 5)
	w.annotate("be", v2alpha1.AnnotationPauseRollout, "true")
	w.setVersion(v2, keysOf(5)...)
	mark := len(w.started)
	fe2 := w.name("fe2")
	for i := 0; !strings.Contains(w.startedSince(mark), "fe2"); i++ {
		if i > 100 {
			t.Fatalf("fe2 never started:\n%s", strings.Join(w.log, "\n"))
		}
		w.reconcileStep()
	}
	w.missing = map[string]int{fe2: 1} // the second pod comes once the first is Ready
	for w.pods[fe2][0].Conditions[string(corev1.PodReady)] != string(corev1.ConditionTrue) {
		w.reconcileStep()
	}
	w.reconcileStep()
	assert.NotEqual(t, v2alpha1.ReasonRolloutComplete, w.condition("fe2").Reason, "fe2 is not complete with a pod missing")
	w.crash("be")
	w.podSeq++
	pod := Pod{Name: fmt.Sprintf("%s-%d", fe2, w.podSeq), Version: v2, Hash: StampedTarget(w.nodes[fe2]),
		Conditions: map[string]string{string(corev1.PodReady): string(corev1.ConditionFalse)}}
	ok, why := PodsMayStart(w.snapshot(), fe2) // the pod webhook reads fresh: still missing while admitted
	assert.True(t, ok, "fe2's second pod is part of its rollout: %s", why)
	if !ok {
		pod.Gates = []string{v2alpha1.GateSequencer}
	}
	w.pods[fe2] = append(w.pods[fe2], pod)
	w.missing = nil
	w.rolling[fe2] = 2
	w.annotate("be", v2alpha1.AnnotationPauseRollout, "")
	beReleased, fe2Ready := -1, -1
	for range 60 {
		w.reconcileStep()
		if beReleased < 0 && !Gated(w.nodes[w.name("be")]) {
			beReleased = w.tick
		}
		if fe2Ready < 0 && w.snapshot().converged(fe2) && !slices.ContainsFunc(w.pods[fe2], Pod.HeldBySequencer) {
			fe2Ready = w.tick
		}
	}
	assert.Positive(t, fe2Ready, "fe2 Ready on v2")
	assert.Greater(t, beReleased, fe2Ready, "be is released on v2 only after fe2 is Ready on it\n%s", strings.Join(w.log, "\n"))
}
