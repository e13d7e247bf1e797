package rollout

// Rollouts under way whose pods are lost together with their
// predecessors': the pod hold must neither deadlock nor let a backend
// upgrade overtake a frontend rollout the upgrade order puts before it.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

func prereqOf(w *world, key string) v2alpha1.Prerequisite {
	kind := v2alpha1.KindFrontend
	if key == "be" {
		kind = v2alpha1.KindBackend
	}
	return v2alpha1.Prerequisite{ExpressNode: w.name(key), Kind: kind, PodConditionType: "Ready", ConditionStatus: "True"}
}

func explicitLists(w *world, prov, upg []string) func(*v2alpha1.NodeSpec) {
	return func(s *v2alpha1.NodeSpec) {
		d := &v2alpha1.DeploymentDependencies{ProvisioningPrerequisites: []v2alpha1.Prerequisite{}, UpgradePrerequisites: []v2alpha1.Prerequisite{}}
		for _, k := range prov {
			d.ProvisioningPrerequisites = append(d.ProvisioningPrerequisites, prereqOf(w, k))
		}
		for _, k := range upg {
			d.UpgradePrerequisites = append(d.UpgradePrerequisites, prereqOf(w, k))
		}
		s.DeploymentDependencies = d
	}
}

// Explicit lists shaped like the user's allNodeConfig: provisioning fe1→be,
// fe2→fe1; upgrade fe2→fe1, be→fe2. While fe2 rolls a change to all, fe1
// gets a hotfix (two rollouts under way); then be (gated, waiting for fe2)
// crashes and the pods of fe1 and fe2 are lost. fe1's pods would wait for
// be, be waits for fe2, fe2's pods would wait for fe1: holding them would
// hold the tenant forever, so the half-done rollouts finish first.
func TestTwoRolloutsUnderWayLosingTheirPodsWithACrashedBackendDoNotDeadlock(t *testing.T) {
	w := newWorld(t, "acme")
	w.deadline = 10 * time.Second
	w.create("be", v1, explicitLists(w, nil, []string{"fe2"}))
	w.create("fe1", v1, explicitLists(w, []string{"be"}, nil))
	w.create("fe2", v1, explicitLists(w, []string{"fe1"}, []string{"fe1"}))
	w.run(200)
	mark := len(w.started)
	w.setVersion(v2, "be", "fe1", "fe2")
	for !strings.HasSuffix(w.startedSince(mark), "fe2") {
		w.step()
	}
	w.setVersion("express-e689.155", "fe1") // hotfix while fe2 rolls
	for !strings.HasSuffix(w.startedSince(mark), "fe1") {
		w.step()
	}
	w.crash("be")
	w.evict("fe1", "fe2")
	for i := 0; i < 120 && !w.settled(); i++ {
		w.step()
	}
	if !w.settled() {
		t.Errorf("deadlock: fe1 %s / fe2 %s / be %s\n%s", w.condition("fe1").Reason, w.condition("fe2").Reason, w.condition("be").Reason, w.dump())
	}
}

// Pods of be, fe1 and fe2 lost (evicted, or be crashed) while fe2 rolls a
// change to all. be's upgrade wait for fe1 is circular with fe1's recovery
// (which waits for be) and is dropped — but only that one: be still waits
// for fe2's half-done rollout. DESIGN §4: "be crashes while fe2 is rolling a
// change to all: BE (on the new target) only after FE2 is Ready on it".
func TestTheBackendIsUpgradedOnlyAfterTheRollingFe2EvenWhenTheirPodsAreLost(t *testing.T) {
	for _, crashBE := range []bool{false, true} {
		w := newWorld(t, "acme")
		mark := settledTenant(w, 5)
		w.setVersion(v2, keysOf(5)...)
		for !strings.HasSuffix(w.startedSince(mark), "fe2") {
			w.step()
		}
		if crashBE {
			w.crash("be")
			w.evict("fe1", "fe2")
		} else {
			w.evict("be", "fe1", "fe2")
		}
		for i := 0; i < 100 && !w.settled(); i++ {
			wasGated := Gated(w.nodes[w.name("be")])
			w.step()
			if wasGated && !Gated(w.nodes[w.name("be")]) && !w.snapshot().converged(w.name("fe2")) {
				t.Errorf("crashBE=%v tick %d: be released for v2 while fe2 is not Ready on v2: %s", crashBE, w.tick, w.condition("fe2").Message)
			}
		}
	}
}

func ready(w *world, key string) bool { return w.snapshot().isReady(w.name(key)) }

// fe2 prov [be fe1]; be upg [fe2]. fe2 rolling a change to all; be (gated,
// waiting for fe2) crashes; fe1 (converged, recorded) crashes; fe2's pods are
// evicted. be waits for fe2, but fe1 does not: fe2's new pods wait for fe1.
func TestAnInFlightNodesPodsWaitForAPredecessorThatDoesNotWaitForIt(t *testing.T) {
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
}

// A later change landing (rollout-id) while fe2 rolls and be is crashed:
// be, held by the landing, still waits for fe2 once let go, so fe2's
// half-done rollout is not frozen meanwhile.
func TestAChangeLandingDoesNotFreezeAHalfDoneRollout(t *testing.T) {
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
}

// A node with no annotations at all (created before the webhook, never
// updated since), ungated and not Ready: Preview does not trip on it.
func TestPreviewTakesANodeWithoutAnnotations(t *testing.T) {
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
	assert.Empty(t, p.Steps, "nothing is gated")
}

// The Backend deleted (gone) while fe1 rolls a change: fe1's pods wait for a
// Backend that does not exist, and deciding so does not trip on it.
func TestAMissingBackendOfAnInFlightNodeIsAWaitNotACrash(t *testing.T) {
	w := newWorld(t, "acme")
	mark := settledTenant(w, 3)
	w.setVersion(v2, "fe1", "fe2")
	for !strings.HasSuffix(w.startedSince(mark), "fe1") {
		w.step()
	}
	w.remove("be")
	delete(w.nodes, w.name("be")) // its finalizer done: gone
	delete(w.pods, w.name("be"))
	t.Logf("fe1 inFlight=%v", w.snapshot().inFlight(w.name("fe1")))
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("PodsMayStart panicked: %v", r)
			}
		}()
		ok, msg := PodsMayStart(w.snapshot(), w.name("fe1"))
		assert.False(t, ok)
		assert.Contains(t, msg, "does not exist")
	}()
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Errorf("Plan panicked: %v", r)
			}
		}()
		Plan(w.snapshot())
	}()
}
