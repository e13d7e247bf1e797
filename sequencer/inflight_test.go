package sequencer

// Rollouts under way whose pods are lost together with their
// predecessors': the pod hold must neither deadlock nor let a backend
// upgrade overtake a frontend rollout the upgrade order puts before it.

import (
	"strings"
	"testing"
	"time"

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
			wasGated := gated(w.nodes[w.name("be")])
			w.step()
			if wasGated && !gated(w.nodes[w.name("be")]) && !w.snapshot().converged(w.name("fe2")) {
				t.Errorf("crashBE=%v tick %d: be released for v2 while fe2 is not Ready on v2: %s", crashBE, w.tick, w.condition("fe2").Message)
			}
		}
	}
}
