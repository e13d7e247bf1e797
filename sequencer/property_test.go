package sequencer

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// TestReleasesHoldTheirRequirementsInRandomScenarios runs 10,000 seeded
// random scenarios — tenant sizes, up/down flags, version bumps, crashes,
// explicit acyclic prerequisite graphs, random interleavings — and checks
// every release against an independent reading of the rules, and that every
// scenario settles.
func TestReleasesHoldTheirRequirementsInRandomScenarios(t *testing.T) {
	scenarios := 10000
	if testing.Short() {
		scenarios = 1000
	}
	releases := 0
	for seed := uint64(1); seed <= uint64(scenarios); seed++ {
		rng := rand.New(rand.NewPCG(seed, 0x5eed))
		w := newWorld(t, "t")
		w.rng = rng
		size := 1 + rng.IntN(8)
		keys := keysOf(size)
		explicit := rng.IntN(2) == 0
		rank := rng.Perm(size) // explicit prerequisites only point at lower ranks: no loops
		for i, k := range keys {
			edit := func(s *v2alpha1.NodeSpec) {
				if rng.IntN(5) == 0 {
					s.Up = ptr.To(false)
				}
				if explicit {
					s.DeploymentDependencies = &v2alpha1.DeploymentDependencies{
						ProvisioningPrerequisites: randomPrerequisites(rng, w, keys, rank, i),
						UpgradePrerequisites:      randomPrerequisites(rng, w, keys, rank, i),
					}
				}
			}
			w.create(k, v1, edit)
		}
		w.run(1000)
		for step := 0; step < 1+rng.IntN(3); step++ {
			switch rng.IntN(3) {
			case 0:
				w.setVersion(fmt.Sprintf("express-%d", step+2), randomSubset(rng, keys)...)
			case 1:
				w.crash(randomSubset(rng, keys)...)
			case 2:
				k := keys[rng.IntN(size)]
				w.update(k, func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(!n.NodeSpec().IsUp()) })
			}
			for i := rng.IntN(4); i > 0; i-- { // let the change run a little before the next one
				w.tick++
				w.sequence()
				w.operate()
			}
		}
		w.run(1000)
		releases += w.released
	}
	t.Logf("%d scenarios, %d releases, every one checked", scenarios, releases)
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

func randomSubset(rng *rand.Rand, keys []string) []string {
	var out []string
	for _, k := range keys {
		if rng.IntN(2) == 0 {
			out = append(out, k)
		}
	}
	return out
}
