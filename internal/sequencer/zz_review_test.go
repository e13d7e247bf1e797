package sequencer

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// naive old implementation: loop exists from start with fresh seen per first wait.
func naiveLoop(g waitGraph, start string) bool {
	for _, first := range g[start] {
		seen := map[string]bool{}
		var walk func(at string) bool
		walk = func(at string) bool {
			if at == start {
				return true
			}
			if seen[at] {
				return false
			}
			seen[at] = true
			for _, w := range g[at] {
				if walk(w.to) {
					return true
				}
			}
			return false
		}
		if walk(first.to) {
			return true
		}
	}
	return false
}

func TestReviewLoopVsTarjanRandomGraphs(t *testing.T) {
	for seed := uint64(1); seed <= 3000; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		n := 1 + rng.IntN(12)
		g := waitGraph{}
		for i := 0; i < n; i++ {
			v := fmt.Sprint("v", i)
			for j := 0; j < n; j++ {
				if rng.IntN(5) == 0 {
					g[v] = append(g[v], wait{to: fmt.Sprint("v", j)})
				}
			}
			if rng.IntN(6) == 0 {
				g[v] = append(g[v], wait{to: fmt.Sprint("x", i)}) // dangling
			}
		}
		on := g.onLoops()
		for i := 0; i < n; i++ {
			v := fmt.Sprint("v", i)
			want := naiveLoop(g, v)
			l, ok := g.loop(v, all)
			if ok != want || on[v] != want {
				t.Fatalf("seed %d %s: naive %v loop %v tarjan %v\n%v", seed, v, want, ok, on[v], g)
			}
			if ok { // verify loop valid
				at := v
				for _, w := range l {
					found := false
					for _, e := range g[at] {
						if e.to == w.to {
							found = true
						}
					}
					if !found {
						t.Fatalf("seed %d invalid loop", seed)
					}
					at = w.to
				}
				if at != v {
					t.Fatalf("seed %d loop does not close", seed)
				}
			}
		}
	}
}

// oldChartN: old chart lists for size n.
func reviewOldChart(w *world, size int) {
	oldChart(size)(w)
}

func TestReviewOldChartLarge(t *testing.T) {
	for _, size := range []int{8, 10, 12} {
		keys := keysOf(size)
		cases := map[string][]step{
			"change all":            {version(v2, keys...)},
			"crash be then all":     {crash("be"), version(v2, keys...)},
			"all then crash be mid": {version(v2, keys...), untilStarted("fe2"), crash("be")},
			"all then crash be fe1": {version(v2, keys...), untilStarted("fe1"), crash("be")},
			"crash be fe5 all":      {crash("be", "fe5"), version(v2, keys...)},
			"blip be during":        {version(v2, keys...), untilStarted("fe1"), blip("be"), ticks(1), blip("fe1")},
			"lose be during":        {version(v2, keys...), untilStarted("fe2"), lose("be")},
			"lose fe2 during":       {version(v2, keys...), untilStarted("fe2"), lose("fe2"), crash("be")},
			"evict all mid":         {version(v2, keys...), untilStarted("be"), evict(keys...)},
			"crash all":             {crash(keys...)},
			"config then crash fe3": {config("c2", keys...), untilStarted("be"), crash("fe3", "be")},
			"fe3 down then up new":  {up("fe3", ptr.To(false)), settle, changeAllUp(size)},
			"be down then up new": {up("be", ptr.To(false)), settle, func(w *world) {
				w.update("be", func(n v2alpha1.Node) { n.NodeSpec().Up = nil; n.NodeSpec().ExpressVersion = v2 })
			}, version(v2, keys[1:]...)},
			"scaleUp be then all": {scaleUp("be"), version(v2, keys...)},
		}
		for name, change := range cases {
			for _, lists := range []string{"default", "old"} {
				t.Run(fmt.Sprintf("%d/%s/%s", size, lists, name), func(t *testing.T) {
					w := newWorld(t, "acme")
					if lists == "old" {
						reviewOldChart(w, size)
					} else {
						settledTenant(w, size)
					}
					w.phases = []int{len(w.started)}
					for _, s := range change {
						s(w)
					}
					w.run(600)
					t.Logf("%s", startsByPass(w, w.phases[0]))
				})
			}
		}
	}
}

// explicit lists with a reversed pair: upgrade order swaps two nodes relative to provisioning.
func TestReviewReversedPairs(t *testing.T) {
	for size := 3; size <= 9; size += 3 {
		keys := keysOf(size)
		for a := 0; a < size; a++ {
			for b := a + 1; b < size; b++ {
				for _, ev := range []string{"none", "crashA", "crashB", "crashBoth", "loseA", "evictB", "blipA"} {
					name := fmt.Sprintf("%d/%s<->%s/%s", size, keys[a], keys[b], ev)
					t.Run(name, func(t *testing.T) {
						w := newWorld(t, "acme")
						w.deadline = 10 * time.Second
						// provisioning: chain in key order; upgrade: same chain but a and b swapped
						upOrder := append([]string{}, keys...)
						upOrder[a], upOrder[b] = upOrder[b], upOrder[a]
						for i, k := range keys {
							var prov, upg []string
							if i > 0 {
								prov = []string{keys[i-1]}
							}
							j := indexOf(upOrder, k)
							if j > 0 {
								upg = []string{upOrder[j-1]}
							}
							w.create(k, v1, explicitLists(w, prov, upg))
						}
						w.run(400)
						w.phases = []int{len(w.started)}
						switch ev {
						case "crashA":
							w.crash(keys[a])
						case "crashB":
							w.crash(keys[b])
						case "crashBoth":
							w.crash(keys[a], keys[b])
						}
						w.setVersion(v2, keys...)
						switch ev {
						case "loseA":
							w.step()
							w.step()
							w.lose(keys[a])
						case "evictB":
							w.step()
							w.step()
							w.step()
							w.evict(keys[b])
						case "blipA":
							w.step()
							w.blip(keys[a])
						}
						w.run(600)
						t.Logf("%s", startsByPass(w, w.phases[0]))
					})
				}
			}
		}
	}
}

func indexOf(s []string, k string) int {
	for i, x := range s {
		if x == k {
			return i
		}
	}
	return -1
}

// random events on old chart / reversed lists, large tenants, with rng.
func TestReviewRandomLoops(t *testing.T) {
	fails := 0
	for seed := uint64(1); seed <= 400; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0xabc))
		ok := t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			w := newWorld(t, "t")
			w.rng = rng
			w.blips = rng.IntN(2) == 0
			w.deadline = 20 * time.Second
			size := 3 + rng.IntN(10)
			keys := keysOf(size)
			mode := rng.IntN(3)
			switch mode {
			case 0:
				oldChart(size)(w)
			case 1:
				w.tenant(size, v1)
				w.run(1000)
			default:
				// provisioning chain, upgrade chain random permutation
				perm := rng.Perm(size)
				upOrder := make([]string, size)
				for i, p := range perm {
					upOrder[i] = keys[p]
				}
				for i, k := range keys {
					var prov, upg []string
					if i > 0 {
						prov = []string{keys[i-1]}
					}
					if j := indexOf(upOrder, k); j > 0 {
						upg = []string{upOrder[j-1]}
					}
					w.create(k, v1, explicitLists(w, prov, upg))
				}
				w.run(1000)
			}
			for s := 0; s < 1+rng.IntN(4); s++ {
				ver := fmt.Sprintf("express-%d", s+2)
				switch rng.IntN(9) {
				case 0:
					w.crash(randomSubset(rng, keys)...)
				case 1:
					w.crash("be")
				case 2:
					w.lose(keys[rng.IntN(size)])
				case 3:
					w.evict(randomSubset(rng, keys)...)
				case 4:
					w.blip(randomSubset(rng, keys)...)
				case 5:
					k := keys[rng.IntN(size)]
					w.update(k, func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(!n.NodeSpec().IsUp()) })
				case 6:
					k := keys[rng.IntN(size)]
					w.update(k, func(n v2alpha1.Node) { n.NodeSpec().Up = nil; n.NodeSpec().ExpressVersion = ver })
				case 7:
					w.setConfig(ver, keys...)
				default:
					w.setVersion(ver, keys...)
				}
				for i := rng.IntN(5); i > 0; i-- {
					w.step()
				}
			}
			w.run(2000)
		})
		if !ok {
			fails++
			if fails > 3 {
				t.FailNow()
			}
		}
	}
}

var _ = strings.Join
