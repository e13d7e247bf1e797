package rollout

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// TestReleasesHoldTheirRequirementsInRandomScenarios runs 10,000 seeded
// random scenarios — tenant sizes, up/down flags, version and config-only
// changes, crashes during changes, readiness blips, StatefulSets scaled up
// (a node short of a pod), pauses set and lifted, pods deleted and recreated with no delay,
// nodes coming back with new targets, deletions, nodes deleted and created
// again over their old workload, nodes rolled back and taken down in one
// write, nodes the chart no longer renders, changes applied node by node
// with rollout-id and random gaps (some past the landing timeout), kubectl
// edits without a new rollout-id or dropping it, settle times, explicit acyclic
// prerequisite graphs, some with the old chart's pins (re-rendered by each
// chart apply, left stale by a kubectl edit), random interleavings — and checks every release of a node and of a pod
// against an independent reading of the rules (DESIGN v2), and that every
// scenario settles. PROPERTY_SCENARIOS and PROPERTY_FIRST_SEED run other
// seeds than the first 10,000 (make property-more runs the next 100,000).
func TestReleasesHoldTheirRequirementsInRandomScenarios(t *testing.T) {
	scenarios := 10000
	if testing.Short() {
		scenarios = 1000
	}
	first := uint64(1)
	if n, err := strconv.Atoi(os.Getenv("PROPERTY_SCENARIOS")); err == nil && n > 0 {
		scenarios = n
	}
	if n, err := strconv.ParseUint(os.Getenv("PROPERTY_FIRST_SEED"), 10, 64); err == nil && n > 0 {
		first = n
	}
	releases, podReleases, wakes, refused, onLoops := 0, 0, 0, 0, 0
	reads, podReads := map[string]int{}, map[string]int{}
	for seed := first; seed < first+uint64(scenarios); seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		w := newWorld(t, "t")
		w.rng = rng
		w.freezes = seed%2 == 0    // a frozen replica's writes land late, through the API server's guards
		w.scoped = seed%3 == 0     // the sequencer plans a release on its cache and what the release rests on, read by name
		w.podsByName = seed%2 == 1 // the pod webhook lets a new pod start on what its start rests on, read by name
		w.logf("scenario seed %d", seed)
		size := 1 + rng.IntN(8)
		keys := keysOf(size)
		explicit := rng.IntN(2) == 0
		// Some nodes' lists the user's, the others the operator's defaults:
		// a user's upgrade list may name any node, one whose defaulted list
		// waits for it too — loops of upgrade waits alone, and loops through
		// both kinds of list and both orders.
		mixed := !explicit && rng.IntN(3) == 0
		w.cyclesMaySettle = mixed
		// The user's old chart pins every entry to the version and
		// revision it renders for the node named (seeds/004).
		pinned := explicit && rng.IntN(2) == 0
		withID := rng.IntN(2) == 0
		if rng.IntN(2) == 0 {
			// With rollout-id, the settle time groups the changes that come
			// without a new id (the kubectl edits below).
			w.grouping = Grouping{SettleTime: 3 * time.Second, SettleCap: 10 * time.Second}
		}
		if withID && rng.IntN(2) == 0 {
			w.grouping.LandingTimeout = 20 * time.Second // some changes land after it
		}
		rank := rng.Perm(size) // explicit prerequisites only point at lower ranks: no loop within a list
		upgradeRank := rank
		if rng.IntN(2) == 0 {
			// The two lists ranked apart, as the user's table has them
			// (provisioning be, fe1, fe2; upgrade fe1, fe2, be): loops that
			// mix provisioning and upgrade waits.
			upgradeRank = rng.Perm(size)
		}
		for i, k := range keys {
			edit := func(s *v2alpha1.NodeSpec) {
				if rng.IntN(5) == 0 {
					s.Up = ptr.To(false)
				}
				if explicit {
					s.DeploymentDependencies = &v2alpha1.DeploymentDependencies{
						ProvisioningPrerequisites: randomPrerequisites(rng, w, keys, rank, i),
						UpgradePrerequisites:      randomPrerequisites(rng, w, keys, upgradeRank, i),
					}
				}
				if mixed && rng.IntN(2) == 0 {
					s.DeploymentDependencies = &v2alpha1.DeploymentDependencies{UpgradePrerequisites: randomPrerequisites(rng, w, keys, anyOther(size, i), i)}
					if rng.IntN(2) == 0 {
						// Only nodes the default provisioning order has
						// ahead of it (be, fe1, fe2, …): no loop of
						// provisioning waits, which the validating webhook
						// refuses.
						s.DeploymentDependencies.ProvisioningPrerequisites = randomPrerequisites(rng, w, keys, inKeyOrder(size), i)
					}
				}
			}
			w.create(k, v1, edit)
			if withID {
				w.setRolloutID("r0", k)
			}
		}
		if pinned {
			for _, k := range keys {
				w.update(k, func(n v2alpha1.Node) { renderPins(w, n, nil) })
			}
		}
		w.run(1000)
		dropped := map[string]bool{} // nodes no render reaches any more
		for step := 0; step < 1+rng.IntN(4); step++ {
			version := fmt.Sprintf("express-%d", step+2)
			if step > 0 && rng.IntN(3) == 0 {
				// A revert (an Argo CD rollback, a roll-forward after it):
				// back to a version of an earlier step, which some node ran
				// or was released for: v1, express-2, …, express-(step+1).
				if i := rng.IntN(step + 1); i == 0 {
					version = v1
				} else {
					version = fmt.Sprintf("express-%d", i+1)
				}
			}
			switch op := rng.IntN(20); {
			case op == 17:
				// up: false and back at once, before the operator or the
				// sequencer looks: nothing of it was taken down.
				k := keys[rng.IntN(size)]
				if n := w.nodes[w.name(k)]; n != nil && n.NodeSpec().IsUp() {
					w.update(k, func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
					w.update(k, func(n v2alpha1.Node) { n.NodeSpec().Up = nil })
				}
			case op == 18:
				// A change to all, one node changed back before its
				// release: gated on the target it was released for.
				k := keys[rng.IntN(size)]
				if n := w.nodes[w.name(k)]; n != nil {
					prev := n.NodeSpec().ExpressVersion
					w.setVersion(version, keys...)
					w.setVersion(prev, k)
				}
			case op == 19:
				// Crashes and a lost machine at once.
				w.crash(randomSubset(rng, keys)...)
				w.evict(randomSubset(rng, liveKeys(w, keys))...)
			case op == 16 && withID && !pinned && size > 1:
				// A node the chart no longer renders (Argo CD does not
				// prune): no later render reaches it. (Not with pins: its own
				// pins, never rendered again, could hold a node that walks
				// through it forever.)
				dropped[keys[1+rng.IntN(size-1)]] = true
				chartApply(w, rng, randomSubset(rng, keys), rendered(keys, dropped), version, withID, pinned, step)
			case op == 15:
				// Deleted and created again with the same spec, its old
				// StatefulSet and pods alive until the garbage collector
				// removes them.
				w.recreate(randomSubset(rng, rendered(liveKeys(w, keys), dropped))...) // from the chart's manifests: a node it renders
			case op == 14:
				// Rolled back and taken down in one write: a release the
				// operator has not carried out (another system's gate) is
				// overtaken, and its StatefulSet scaled to 0 on the old
				// template.
				k := keys[rng.IntN(size)]
				w.update(k, func(n v2alpha1.Node) { n.NodeSpec().ExpressVersion = version; n.NodeSpec().Up = ptr.To(false) })
			case op == 13:
				// Another system's rollout gate holds the Express operator
				// on some nodes (DESIGN §2), as a slow or restarting
				// operator does: a release can be overtaken by the next
				// change before it is carried out.
				w.toggleOtherSystemsGate(randomSubset(rng, liveKeys(w, keys))...)
			case op == 12 && withID && w.grouping.LandingTimeout > 0:
				// A kubectl apply of a manifest without the id: the nodes
				// disagree until the landing timeout.
				for _, k := range randomSubset(rng, liveKeys(w, keys)) {
					w.update(k, func(n v2alpha1.Node) {
						n.NodeSpec().ExpressVersion = version
						setAnnotation(n, v2alpha1.AnnotationRolloutID, "")
					})
				}
			case op == 11:
				for _, k := range randomSubset(rng, liveKeys(w, keys)) {
					paused := annotated(w.nodes[w.name(k)], v2alpha1.AnnotationPauseRollout)
					w.annotate(k, v2alpha1.AnnotationPauseRollout, map[bool]string{false: "true"}[paused])
				}
			case op == 8:
				w.blip(randomSubset(rng, liveKeys(w, keys))...)
			case op == 9:
				w.scaleUp(randomSubset(rng, liveKeys(w, keys))...)
			case op == 10:
				w.lose(randomSubset(rng, liveKeys(w, keys))...)
			case op == 0:
				w.setVersion(version, randomSubset(rng, keys)...)
			case op == 1:
				w.crash(randomSubset(rng, keys)...)
			case op == 2:
				k := keys[rng.IntN(size)]
				w.update(k, func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(!n.NodeSpec().IsUp()) })
			case op == 3:
				w.setConfig(version, randomSubset(rng, keys)...)
			case op == 4:
				w.evict(randomSubset(rng, liveKeys(w, keys))...)
			case op == 5 && size > 1 && !explicit && !mixed: // an explicit list naming a deleted node waits for it forever
				k := keys[1+rng.IntN(size-1)]
				if _, ok := w.nodes[w.name(k)]; ok {
					w.remove(k)
					if withID && !pinned {
						// Removed from the values and pruned: the chart's
						// next render lists it no more (a render still
						// listing it would wait for it to be created
						// again, up to the landing timeout).
						dropped[k] = true
						chartApply(w, rng, nil, rendered(keys, dropped), version, withID, pinned, step)
					}
				}
			case op == 6:
				k := keys[rng.IntN(size)]
				w.update(k, func(n v2alpha1.Node) { n.NodeSpec().Up = nil; n.NodeSpec().ExpressVersion = version })
			default:
				chartApply(w, rng, randomSubset(rng, keys), rendered(keys, dropped), version, withID, pinned, step)
			}
			for i := rng.IntN(4); i > 0; i-- { // let the change run a little before the next one
				w.step()
			}
		}
		for _, k := range liveKeys(w, keys) { // a paused or held node settles only once its hold is lifted
			if annotated(w.nodes[w.name(k)], v2alpha1.AnnotationPauseRollout) {
				w.annotate(k, v2alpha1.AnnotationPauseRollout, "")
			}
			w.liftOtherSystemsGate(k)
		}
		if pinned {
			// A kubectl edit of a version leaves the pins naming that node
			// stale, and nothing meets them (DESIGN §4: the node waits and
			// says for what); the chart's next render mends them.
			chartApply(w, rng, nil, rendered(keys, dropped), "", withID, pinned, 9)
		}
		w.run(1000)
		releases += w.released
		podReleases += w.podsReleased
		wakes += w.wakes
		refused += w.refused
		onLoops += w.settledOnLoops
		for read, n := range w.reads {
			reads[read] += n
		}
		for read, n := range w.podReads {
			podReads[read] += n
		}
	}
	t.Logf("%d scenarios, %d releases and %d pod releases, every one checked; a frozen replica woke %d times, the release guard refused %d of its releases", scenarios, releases, podReleases, wakes, refused)
	t.Logf("with scoped reads: %d passes planned on the cache alone, %d on the workload a release rests on, %d on the whole tenant", reads[ReadCache], reads[ReadDecision], reads[ReadTenant])
	assert.Positive(t, reads[ReadDecision], "releases planned on the scoped read")
	t.Logf("with pods admitted by name: %d new pods let start on the nodes read by name, %d held on them (%d of which the whole tenant would have let start: the sequencer let them go), %d answered on the whole tenant",
		podReads[ReadDecision], podReads[podsHeldByName], podReads[podsHeldByNameOnly], podReads[ReadTenant])
	assert.Positive(t, podReads[ReadDecision], "pods let start on the nodes read by name")
	assert.Positive(t, podReads[podsHeldByName], "pods held on the nodes read by name")
	t.Logf("%d times the tenant settled with nodes held on a loop of the user's lists (DependencyCycle) and those behind them waiting", onLoops)
	if !testing.Short() { // too few scenarios under -short for a frozen replica's release to go stale
		assert.Positive(t, refused, "frozen replicas' stale releases meet the release guard")
		assert.Positive(t, onLoops, "tenants held on loops no order meets")
	}
}

// chartApply renders a change to the nodes changed — a new version, config
// or revision, and a node brought back up — and applies it to every node
// node by node in random order with random gaps, as Helm or a slow Argo CD
// sync do; with rollout-id every node gets the render's id, with pinned
// lists every entry is pinned to what the render gives the node it names.
func chartApply(w *world, rng *rand.Rand, changed, keys []string, version string, withID, pinned bool, step int) {
	field := rng.IntN(3)
	rendered := map[string]v2alpha1.NodeSpec{}
	for _, k := range keys {
		n, ok := w.nodes[w.name(k)]
		if !ok {
			continue // deleted
		}
		spec := *n.NodeSpec()
		if slices.Contains(changed, k) {
			switch field {
			case 0:
				spec.ExpressVersion = version
			case 1:
				spec.ConfigChangeset = version
			default:
				spec.DeploymentRevision = version
			}
		}
		rendered[w.name(k)] = spec
	}
	var listed []string // the render lists what it renders: no deleted node
	for _, k := range keys {
		if n, ok := w.nodes[w.name(k)]; ok && n.GetDeletionTimestamp() == nil {
			listed = append(listed, k)
		}
	}
	order := rng.Perm(len(keys))
	for _, i := range order {
		k := keys[i]
		if _, ok := rendered[w.name(k)]; !ok {
			continue // deleted
		}
		w.update(k, func(n v2alpha1.Node) {
			if slices.Contains(changed, k) {
				spec := rendered[w.name(k)]
				n.NodeSpec().ExpressVersion, n.NodeSpec().ConfigChangeset, n.NodeSpec().DeploymentRevision = spec.ExpressVersion, spec.ConfigChangeset, spec.DeploymentRevision
				if rng.IntN(4) == 0 {
					n.NodeSpec().Up = nil
				}
			}
			if pinned {
				renderPins(w, n, rendered)
			}
			if withID {
				w.renderOf(n, fmt.Sprintf("r%d", step+1), listed) // the render says which nodes it renders
			}
		})
		for gap := rng.IntN(3); gap > 0; gap-- {
			w.step()
		}
	}
}

// renderPins pins every entry of the node's lists to the version and
// revision rendered for the node it names: from rendered, else that node's
// spec as it stands.
func renderPins(w *world, n v2alpha1.Node, rendered map[string]v2alpha1.NodeSpec) {
	pinEntries(n.NodeSpec(), func(named string) (string, string, bool) {
		spec, ok := rendered[named]
		if !ok {
			node, live := w.nodes[named]
			if !live {
				return "", "", false
			}
			spec = *node.NodeSpec()
		}
		return spec.ExpressVersion, spec.DeploymentRevision, true
	})
}

// rendered returns the keys a chart render reaches: those not dropped.
func rendered(keys []string, dropped map[string]bool) []string {
	return slices.DeleteFunc(slices.Clone(keys), func(k string) bool { return dropped[k] })
}

// liveKeys are the keys of the nodes that still exist.
func liveKeys(w *world, keys []string) []string {
	var out []string
	for _, k := range keys {
		if _, ok := w.nodes[w.name(k)]; ok {
			out = append(out, k)
		}
	}
	return out
}

func randomPrerequisites(rng *rand.Rand, w *world, keys []string, rank []int, self int) []v2alpha1.Prerequisite {
	out := []v2alpha1.Prerequisite{}
	for j, k := range keys {
		if rank[j] < rank[self] && rng.IntN(2) == 0 {
			kind := v2alpha1.KindFrontend
			if k == "be" {
				kind = v2alpha1.KindBackend
			}
			out = append(out, v2alpha1.Prerequisite{ExpressNode: w.name(k), Kind: kind, PodConditionType: "Ready", ConditionStatus: "True"})
		}
	}
	return out
}

// anyOther ranks node self above every other node: a list ranked so may
// name any of them.
func anyOther(size, self int) []int {
	rank := make([]int, size)
	rank[self] = 1
	return rank
}

// inKeyOrder ranks the nodes as keysOf names them: be, fe1, fe2, ….
func inKeyOrder(size int) []int {
	rank := make([]int, size)
	for i := range rank {
		rank[i] = i
	}
	return rank
}

func randomSubset(rng *rand.Rand, keys []string) []string {
	var out []string
	for _, k := range keys {
		if rng.IntN(2) == 0 {
			out = append(out, k)
		}
	}
	return out
}
