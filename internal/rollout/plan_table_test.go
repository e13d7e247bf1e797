package rollout

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// Plan's decision for one node, at one moment of a small tenant: each case
// is a sentence, a setup stepped in the simulated world, and the decision the
// node gets — gated or not, the reason constant, words its message must
// hold, and the nodes it waits for. Every reason constant appears but
// NameShared, whose cases are in name_clash_test.go: the simulated world
// holds one tenant's nodes, and a shared name needs a node of another.
func TestPlanDecidesOneNode(t *testing.T) {
	type want struct {
		gated      bool
		reason     string
		message    string
		waitingFor []string // keys
	}
	settled := func(size int) func(w *world) {
		return func(w *world) {
			w.tenant(size, v1)
			w.run(100)
		}
	}
	then := func(steps ...func(w *world)) func(w *world) {
		return func(w *world) {
			for _, s := range steps {
				s(w)
			}
		}
	}
	changeAll := func(size int) func(w *world) {
		return func(w *world) {
			keys := []string{"be"}
			for i := 1; i < size; i++ {
				keys = append(keys, "fe"+string(rune('0'+i)))
			}
			w.setVersion(v2, keys...)
		}
	}
	untilStarted := func(key string) func(w *world) { // its next rollout
		return func(w *world) {
			mark := len(w.started)
			for i := 0; i < 50 && !slices.Contains(w.started[mark:], key); i++ {
				w.step()
			}
		}
	}
	cases := map[string]struct {
		setup func(w *world)
		node  string
		want  want
	}{
		"a new tenant's backend is released first, with no prerequisites": {
			setup: func(w *world) { w.tenant(3, v1) },
			node:  "be", want: want{reason: v2alpha1.ReasonReleased, message: "released for provisioning of express-e689.151"},
		},
		"a frontend change waits for a backend that does not exist, its pods running on": {
			setup: then(settled(3), func(w *world) { w.remove("be"); w.step(); w.step(); w.setVersion(v2, "fe1") }),
			node:  "fe1", want: want{gated: true, reason: v2alpha1.ReasonPrerequisiteNotFound, message: "waiting for acme-be (Backend): it does not exist", waitingFor: []string{"be"}},
		},
		"a frontend change waits for a backend being deleted, its pods running on": {
			setup: then(settled(3), func(w *world) { w.setVersion(v2, "fe1", "fe2", "be"); w.remove("be") }),
			node:  "fe1", want: want{gated: true, reason: v2alpha1.ReasonPrerequisiteNotFound, message: "waiting for acme-be (Backend): it is being deleted", waitingFor: []string{"be"}},
		},
		"a new tenant's first frontend waits for a backend whose pods are all Ready while its StatefulSet still creates one more": {
			setup: func(w *world) {
				w.missing = map[string]int{w.name("be"): 1}
				w.tenant(3, v1)
				for range 10 {
					w.step()
				}
				assert.Equal(t, 1, w.snapshot().readyOnTarget(w.name("be")), "be's one pod is Ready on its target")
			},
			node: "fe1", want: want{gated: true, reason: v2alpha1.ReasonWaitingForPrerequisite, message: "waiting for acme-be (Backend) to be Ready", waitingFor: []string{"be"}},
		},
		"a frontend change waits for a backend whose pods are all Ready while its StatefulSet replaces one": {
			setup: then(settled(3), func(w *world) { w.missing = map[string]int{w.name("be"): 1} }, func(w *world) { w.setVersion(v2, "fe1") }),
			node:  "fe1", want: want{gated: true, reason: v2alpha1.ReasonWaitingForPrerequisite,
				message: "waiting for acme-be (Backend) to be Ready (its StatefulSet wants more pods than exist)", waitingFor: []string{"be"}},
		},
		"a new tenant's first frontend waits for the backend to be Ready": {
			setup: func(w *world) { w.tenant(3, v1) },
			node:  "fe1", want: want{gated: true, reason: v2alpha1.ReasonWaitingForPrerequisite, message: "waiting for acme-be (Backend) to be Ready", waitingFor: []string{"be"}},
		},
		"a node Ready on its target is complete": {
			setup: settled(3),
			node:  "fe1", want: want{reason: v2alpha1.ReasonRolloutComplete, message: "Ready on express-e689.151"},
		},
		"a change to all releases fe1 first, by the upgrade order": {
			setup: then(settled(3), changeAll(3)),
			node:  "fe1", want: want{reason: v2alpha1.ReasonReleased, message: "released for upgrade of express-e689.154"},
		},
		"in a change to all the backend waits for fe2 on its new target": {
			setup: then(settled(3), changeAll(3)),
			node:  "be", want: want{gated: true, reason: v2alpha1.ReasonWaitingForPrerequisite, message: "waiting for acme-fe2 (Frontend) to be Ready on express-e689.154", waitingFor: []string{"fe1", "fe2"}},
		},
		"a node intentionally down takes no part": {
			setup: then(settled(3), func(w *world) { w.update("fe2", func(n v2alpha1.Node) { n.NodeSpec().Up = new(false) }) }),
			node:  "fe2", want: want{reason: v2alpha1.ReasonNodeDown, message: "intentionally down"},
		},
		"a node being deleted takes no part": {
			setup: then(settled(3), func(w *world) { w.remove("fe2") }),
			node:  "fe2", want: want{reason: v2alpha1.ReasonNodeDown, message: "being deleted"},
		},
		"ignore-prerequisites releases a waiting node regardless": {
			setup: then(settled(3), changeAll(3), func(w *world) { w.annotate("be", v2alpha1.AnnotationIgnorePrerequisites, "true") }),
			node:  "be", want: want{reason: v2alpha1.ReasonPrerequisitesIgnored, message: "without checking prerequisites"},
		},
		"pause-rollout holds a node whose turn it is": {
			setup: then(settled(3), changeAll(3), func(w *world) { w.annotate("fe1", v2alpha1.AnnotationPauseRollout, "true") }),
			node:  "fe1", want: want{gated: true, reason: v2alpha1.ReasonRolloutPaused, message: "held by express.medallia.com/pause-rollout"},
		},
		"without rollout-id a change is held for the settle time": {
			setup: then(settled(3), func(w *world) { w.grouping = Grouping{SettleTime: 10 * time.Second} }, changeAll(3)),
			node:  "fe1", want: want{gated: true, reason: v2alpha1.ReasonSettling, message: "holding for 10s after the changes to tenant acme"},
		},
		"a change that has landed on some nodes only is held, naming the others, once it lasts": {
			setup: then(settled(3), func(w *world) {
				w.setVersion(v2, "fe1")
				w.setRolloutID("r2", "fe1")
				w.now = w.now.Add(landingQuiet)
			}),
			node: "fe1", want: want{gated: true, reason: v2alpha1.ReasonChangeLanding, message: "acme-be (none), acme-fe2 (none) of 3 nodes still lack rollout-id r2"},
		},
		"a prerequisite naming a node that does not exist blocks": {
			setup: func(w *world) {
				w.create("be", v1, nil)
				w.create("fe1", v1, explicitLists(w, []string{"be", "fe9"}, nil))
			},
			node: "fe1", want: want{gated: true, reason: v2alpha1.ReasonPrerequisiteNotFound, message: "acme-fe9", waitingFor: []string{"be", "fe9"}},
		},
		"explicit upgrade lists that wait for each other are a cycle": {
			setup: then(func(w *world) {
				w.create("be", v1, nil)
				w.create("fe1", v1, explicitLists(w, []string{"be"}, []string{"fe2"}))
				w.create("fe2", v1, explicitLists(w, []string{"be"}, []string{"fe1"}))
				w.run(100)
			}, func(w *world) { w.setVersion(v2, "fe1", "fe2") }),
			node: "fe1", want: want{gated: true, reason: v2alpha1.ReasonDependencyCycle, message: "acme-fe1", waitingFor: []string{"fe2"}},
		},
		"an explicit list that leads back to its node through a down node is a cycle": {
			setup: then(settled(5), func(w *world) {
				w.update("fe3", func(n v2alpha1.Node) { n.NodeSpec().Up = new(false) })
				w.update("be", func(n v2alpha1.Node) {
					n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{UpgradePrerequisites: []v2alpha1.Prerequisite{prereqOf(w, "fe3")}}
				})
			}, changeAll(5), func(w *world) {
				for range 20 {
					w.step() // fe1 and fe2 roll; be is left waiting for itself
				}
			}),
			node: "be", want: want{gated: true, reason: v2alpha1.ReasonDependencyCycle, message: "acme-be → acme-fe3 (down) → acme-be wait for each other", waitingFor: []string{"be"}},
		},
		"a new node whose provisioning list leads back to it through a down node is a cycle: it has no pod that could become Ready": {
			setup: func(w *world) {
				w.create("be", v1, nil)
				w.create("fe3", v1, func(s *v2alpha1.NodeSpec) { s.Up = new(false) })
				w.create("fe1", v1, explicitLists(w, []string{"fe3"}, nil))
				for range 20 {
					w.step() // be becomes Ready; fe1 is left waiting for itself
				}
			},
			node: "fe1", want: want{gated: true, reason: v2alpha1.ReasonDependencyCycle, message: "acme-fe1 → acme-fe3 (down) → acme-fe1 wait for each other", waitingFor: []string{"fe1"}},
		},
		"a node whose pods restart in place while its list leads back to it through a down node is no cycle: it may become Ready by itself": {
			setup: then(settled(4), func(w *world) {
				w.update("fe3", func(n v2alpha1.Node) { n.NodeSpec().Up = new(false) })
				w.update("fe1", func(n v2alpha1.Node) {
					n.NodeSpec().DeploymentDependencies.ProvisioningPrerequisites = []v2alpha1.Prerequisite{prereqOf(w, "fe3")}
				})
				w.run(100)
				for i := range w.pods[w.name("fe1")] {
					w.pods[w.name("fe1")][i].Conditions["Ready"] = "False" // containers restarting, no new pod
				}
			}),
			node: "fe1", want: want{reason: v2alpha1.ReasonWaitingForPrerequisite, message: "through acme-fe3 which is down", waitingFor: []string{"fe1"}},
		},
		"a crashed frontend whose backend is Ready recovers: its pods may schedule": {
			setup: then(settled(3), func(w *world) { w.crash("fe1") }),
			node:  "fe1", want: want{reason: v2alpha1.ReasonRecovering, message: "recovering on express-e689.151 (target edfbddb8a0280827): pods may schedule, acme-be ready"},
		},
		"a frontend whose pods were lost with the backend's waits for it, its new pods gated": {
			setup: then(settled(3), func(w *world) { w.evict("fe1", "be") }),
			node:  "fe1", want: want{reason: v2alpha1.ReasonWaitingForPrerequisite, message: "recovering: new pods held scheduling-gated; waiting for acme-be (Backend) to be Ready", waitingFor: []string{"be"}},
		},
		"a frontend recovering after its backend was deleted says the backend does not exist, its new pods gated": {
			setup: then(settled(3), func(w *world) { w.remove("be"); w.run(3) }, func(w *world) { w.evict("fe1") }),
			node:  "fe1", want: want{reason: v2alpha1.ReasonPrerequisiteNotFound, message: "recovering: new pods held scheduling-gated; waiting for acme-be (Backend): it does not exist", waitingFor: []string{"be"}},
		},
		"a frontend recovering behind a paused backend that recovers waits for the recovery, not the pause, which holds only a release": {
			setup: then(settled(3), func(w *world) { w.annotate("be", v2alpha1.AnnotationPauseRollout, "true"); w.run(3) }, func(w *world) { w.evict("be", "fe1") }),
			node:  "fe1", want: want{reason: v2alpha1.ReasonWaitingForPrerequisite, message: "recovering: new pods held scheduling-gated; waiting for acme-be (Backend) to be Ready", waitingFor: []string{"be"}},
		},
		"a released rollout whose new pods are held by a recovering backend says so": {
			setup: then(settled(3), func(w *world) { w.setVersion(v2, "fe1") }, untilStarted("fe1"), func(w *world) { w.evict("be", "fe1") }),
			node:  "fe1", want: want{reason: v2alpha1.ReasonRolloutPodsHeld, message: "rolling out express-e689.154", waitingFor: []string{"be"}},
		},
		"a released node not Ready within the progress deadline is reported stalled": {
			setup: then(settled(3), func(w *world) { w.deadline = 10 * time.Second; w.stuck[w.name("fe1")] = true }, changeAll(3), untilStarted("fe1"),
				func(w *world) {
					for i := 0; i < 12; i++ {
						w.step()
					}
				}),
			node: "fe1", want: want{reason: v2alpha1.ReasonProgressDeadlineExceeded, message: "released but not Ready on express-e689.154 (target bf26eb65ce111328) within 10s: 0/1 pods Ready on target"},
		},
		"a prerequisite pinned to the version it is rolling out waits for that version": {
			setup: then(pinnedBackend(v1, v2), func(w *world) {
				w.setVersion(v2, "be")
				w.step()
			}),
			node: "fe1", want: want{gated: true, reason: v2alpha1.ReasonWaitingForPrerequisite, message: "waiting for acme-be (Backend) to be Ready on express-e689.154", waitingFor: []string{"be"}},
		},
		"a prerequisite pinned to a version its own target does not carry is stuck, and says both": {
			setup: pinnedBackend(v1, v2),
			node:  "fe1", want: want{gated: true, reason: v2alpha1.ReasonPrerequisitePinUnreachable,
				message:    "waiting for acme-be (Backend) to be Ready on express-e689.154; its own target is express-e689.151 (target edfbddb8a0280827), so no rollout of it gets there until the pin or its spec changes",
				waitingFor: []string{"be"}},
		},
		"a backend whose release was overtaken by a revert before its operator acted waits in the upgrade order when the change comes back": {
			setup: then(settled(3), overtaken("be", changeAll(3))),
			node:  "be", want: want{gated: true, reason: v2alpha1.ReasonWaitingForPrerequisite, message: "to be Ready on express-e689.154", waitingFor: []string{"fe1", "fe2"}},
		},
		"a backend whose release was overtaken waits in the upgrade order with its pods lost, by its StatefulSet's template": {
			setup: then(settled(3), overtaken("be", changeAll(3)), func(w *world) { w.lose("be") }),
			node:  "be", want: want{gated: true, reason: v2alpha1.ReasonWaitingForPrerequisite, message: "to be Ready on express-e689.154", waitingFor: []string{"fe1", "fe2"}},
		},
		"a backend whose release its operator carried out before the revert is released at once when the change comes back": {
			setup: then(settled(3), changeAll(3), untilStarted("be"), func(w *world) { w.step(); w.setVersion(v1, "be", "fe1", "fe2") }, changeAll(3)),
			node:  "be", want: want{reason: v2alpha1.ReasonReleased, message: "released for provisioning of express-e689.154"},
		},
		"a change to all while the backend is crashed rolls the backend first, by the provisioning order": {
			setup: then(settled(3), func(w *world) { w.crash("be") }, changeAll(3)),
			node:  "be", want: want{reason: v2alpha1.ReasonReleased, message: "by the provisioning order (its upgrade waits for acme-fe1, acme-fe2 were circular)"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "acme")
			tc.setup(w)
			d := decisionFor(t, w, tc.node)
			var waits []string
			for _, n := range d.WaitingFor {
				waits = append(waits, w.key(n))
			}
			assert.Equal(t, tc.want.gated, d.Gated, "gated")
			assert.Equal(t, tc.want.reason, d.Condition.Reason, "reason; message: %s", d.Condition.Message)
			assert.Contains(t, d.Condition.Message, tc.want.message)
			assert.Equal(t, tc.want.waitingFor, waits, "waiting for")
		})
	}
}

func TestPlanningWithNeitherACachedSnapshotNorAFreshReaderIsAnError(t *testing.T) {
	snap, decisions, fresh, err := PlanOnFreshest(nil, nil)
	assert.Error(t, err)
	assert.Nil(t, snap)
	assert.Nil(t, decisions)
	assert.False(t, fresh)
}

// overtaken holds node key's operator with another system's rollout gate,
// applies change, steps until the sequencer releases the node, then
// reverts every node to v1 and applies change again: the node's target is
// the one released, its pods still on v1.
func overtaken(key string, change step) step {
	return func(w *world) {
		w.toggleOtherSystemsGate(key)
		change(w)
		w.stepUntilReleased(key)
		n := w.nodes[w.name(key)]
		require.True(w.t, n.NodeSpec().HasGate(otherSystemsGate), "the other gate stays")
		w.setVersion(v1, "be", "fe1", "fe2")
		w.step()
		change(w)
		n = w.nodes[w.name(key)]
		require.Equal(w.t, ReleasedTarget(n), StampedTarget(n), "%s's target is the one released", key)
		require.True(w.t, slices.ContainsFunc(w.pods[w.name(key)], func(p Pod) bool { return p.Version == v1 }), "%s's pods are on v1", key)
	}
}

// pinnedBackend creates be at version and fe1 whose provisioning list pins
// be to pin, and lets be become Ready.
func pinnedBackend(version, pin string) step {
	return func(w *world) {
		w.create("be", version, nil)
		w.create("fe1", version, func(s *v2alpha1.NodeSpec) {
			p := prereqOf(w, "be")
			p.ExpressVersion = pin
			s.DeploymentDependencies = &v2alpha1.DeploymentDependencies{ProvisioningPrerequisites: []v2alpha1.Prerequisite{p}, UpgradePrerequisites: []v2alpha1.Prerequisite{}}
		})
		for i := 0; i < 5; i++ {
			w.step() // the backend becomes Ready on version
		}
	}
}
