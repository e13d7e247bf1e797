package sequencer

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

func ready(w *world, key string) bool { return w.snapshot().isReady(w.name(key)) }

// fe2 prov [be fe1]; be upg [fe2]. fe2 rolling a change to all; be (gated,
// waiting for fe2) crashes; fe1 (converged, recorded) crashes; fe2's pods are
// evicted. fe1's readiness does not depend on fe2 at all, yet fe2's new pods
// schedule while fe1 is not Ready.
func TestZZAnyCircularBlockerLetsPodsPastAnIndependentOne(t *testing.T) {
	w := newWorld(t, "acme")
	w.create("be", v1, explicitLists(w, nil, []string{"fe2"}))
	w.create("fe1", v1, explicitLists(w, nil, nil))
	w.create("fe2", v1, explicitLists(w, []string{"be", "fe1"}, []string{"fe1"}))
	w.run(200)
	mark := len(w.started)
	w.setVersion(v2, "be", "fe1", "fe2")
	for !strings.HasSuffix(w.startedSince(mark), "fe2") {
		w.step()
	}
	t.Logf("fe1 cond %s; fe2 inFlight %v", w.condition("fe1").Reason, w.snapshot().inFlight(w.name("fe2")))
	w.crash("be", "fe1")
	w.evict("fe2")
	fe2 := w.pods[w.name("fe2")]
	t.Logf("after evict: fe1 ready=%v be ready=%v fe2 pods=%+v", ready(w, "fe1"), ready(w, "be"), fe2)
	if !ready(w, "fe1") && !slices.ContainsFunc(fe2, Pod.HeldBySequencer) {
		t.Errorf("fe2's new pod admitted schedulable while its provisioning prerequisite fe1 (independent of fe2) is not Ready\n%s", w.dump())
	}
	w.run(200)
	t.Log(strings.Join(w.log, "\n"))
}

// A later change landing (rollout-id) while fe2 rolls and be is crashed:
// fe2's half-done rollout is frozen until the new change fully lands.
func TestZZLandingHoldFreezesInFlightPods(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(5, v1)
	w.setRolloutID("r1", keysOf(5)...)
	w.run(200)
	mark := len(w.started)
	for _, k := range keysOf(5) {
		w.update(k, func(n v2alpha1.Node) {
			n.NodeSpec().ExpressVersion = v2
			setAnnotation(n, v2alpha1.AnnotationRolloutID, "r2")
		})
	}
	for !strings.HasSuffix(w.startedSince(mark), "fe2") {
		w.step()
	}
	w.setRolloutID("r3", "be") // the next render starts landing
	w.crash("be")
	w.evict("fe2")
	for i := 0; i < 30; i++ {
		w.step()
	}
	t.Logf("fe2: %s: %s", w.condition("fe2").Reason, w.condition("fe2").Message)
	if slices.ContainsFunc(w.pods[w.name("fe2")], Pod.HeldBySequencer) {
		t.Errorf("fe2's half-done rollout frozen for 30 ticks by a landing hold\n%s", w.dump())
	}
	w.setRolloutID("r3", "fe1", "fe2", "fe3", "fe4")
	w.run(200)
	t.Log(w.startedSince(mark))
}

// A node with no annotations at all (created before the webhook, never
// updated since), ungated and not Ready: Preview takes it as rolling and
// writes into its nil annotation map.
func TestZZPreviewNodeWithoutAnnotations(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(200)
	fe1 := w.nodes[w.name("fe1")]
	fe1.SetAnnotations(nil)
	w.crash("fe1")
	defer func() {
		if r := recover(); r != nil {
			t.Errorf("Preview panicked: %v", r)
		}
	}()
	p := Preview(w.snapshot())
	t.Logf("%+v", p)
}

// be (new target, crashed) and fe1 (crashed, recovering): the sequencer
// releases be first, then fe1's pods; Preview says fe1 finishes first.
func TestZZPreviewRollingRecoveringNode(t *testing.T) {
	w := newWorld(t, "acme")
	mark := settledTenant(w, 3)
	w.setVersion(v2, "be")
	w.crash("be", "fe1")
	p := Preview(w.snapshot())
	t.Logf("preview: rolling %v steps %+v", p.Rolling, p.Steps)
	w.run(200)
	t.Logf("real: %s", w.startedSince(mark))
	_ = corev1.PodReady
}
