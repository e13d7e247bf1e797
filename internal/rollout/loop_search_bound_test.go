package rollout

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A loop the depth-first search cannot find within its bound: from the
// prerequisite's target, waits run through a clique of k targets (each
// waits for every other, in order), each of which also waits for a node B
// whose only way on is the readiness r; from r the way home runs through
// the clique again, and on through c2 alone. The depth-first search,
// readiness first, walks the clique before B (its waits come last),
// reaches r with c2 on its path and no way home, and backs up through the
// clique's orderings. The loop exists: from → c1 → B →
// r → c2 → D → home. Found by its shortest ways, it is a loop, not a
// run-out bound: the wait on it is dropped, not kept as a cycle.
func TestALoopTheDepthFirstSearchCannotReachWithinItsBoundIsFoundByItsShortestWays(t *testing.T) {
	const k = 10
	from, home := vertex(stateTarget, "x"), vertex(stateRelease, "home")
	b, d, r := vertex(stateTarget, "b"), vertex(stateTarget, "d"), vertex(stateReady, "r")
	clique := make([]string, k)
	for i := range clique {
		clique[i] = vertex(stateTarget, fmt.Sprintf("c%d", i+1))
	}
	g := waitGraph{from: {{to: clique[0]}}, b: {{to: r}}, d: {{to: home}}}
	for i, c := range clique {
		for j, o := range clique {
			if i != j {
				g[c] = append(g[c], wait{to: o})
			}
		}
		g[c] = append(g[c], wait{to: b})
		g[r] = append(g[r], wait{to: c})
	}
	g[clique[1]] = append(g[clique[1]], wait{to: d})
	// Every vertex reaches home, through c2 and d: none is pruned. The
	// search walks c1 → c2 → … first and must back up past c2 — through
	// the (k-2)! orderings of the rest — before it leaves c2 free for r's
	// way home.
	assert.True(t, g.loopThrough(from, home, readiness), "from → c1 → b → r → c2 → d → home is a loop through readiness")

	// Without the way home that avoids the path to r, there is none.
	delete(g, d)
	g[clique[1]] = g[clique[1]][:len(g[clique[1]])-1]   // no wait on d
	g[clique[0]] = append(g[clique[0]], wait{to: home}) // home only from c1, which the way to r must pass
	assert.False(t, g.loopThrough(from, home, readiness), "every way home passes c1, which every way to r passes too")
}

// The shortest ways find only loops, and the depth-first search finds
// every loop there is, on small random graphs checked against every simple
// way from one vertex to the other, enumerated.
func TestTheLoopSearchesAgreeWithEveryWayEnumeratedOnSmallRandomGraphs(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	loops, byShortest := 0, 0
	for range 3000 {
		n := 3 + rng.IntN(6)
		vs := make([]string, n)
		for i := range vs {
			state := stateTarget
			if rng.IntN(3) == 0 {
				state = stateReady
			}
			vs[i] = vertex(state, fmt.Sprintf("n%d", i))
		}
		// As the planner asks: from a prerequisite's target home to the
		// waiting node's release.
		vs[0], vs[n-1] = vertex(stateTarget, "n0"), vertex(stateRelease, "home")
		g := waitGraph{}
		for _, v := range vs {
			for _, o := range vs {
				if v != o && rng.IntN(3) == 0 {
					g[v] = append(g[v], wait{to: o})
				}
			}
		}
		from, to := vs[0], vs[n-1]
		want := everyWayThrough(g, from, to, readiness)
		leadsTo := g.reaching(to)
		found, steps := g.loopByDepthFirst(from, to, readiness, leadsTo)
		require.Less(t, steps, maxLoopSearchSteps, "a graph of %d vertices", n)
		assert.Equal(t, want, found, "the depth-first search on %v from %s to %s", g, from, to)
		if byWays, _ := g.loopByShortestWays(from, to, readiness, leadsTo); byWays {
			byShortest++
			assert.True(t, want, "the shortest ways found a loop where none is: %v from %s to %s", g, from, to)
		}
		if want {
			loops++
		}
	}
	assert.Positive(t, loops)
	assert.Positive(t, byShortest)
	t.Logf("%d graphs with a loop, %d of them found by the shortest ways", loops, byShortest)
}

// everyWayThrough enumerates the simple ways from "from" to "to" and
// reports whether one passes a vertex through accepts (either end
// included).
func everyWayThrough(g waitGraph, from, to string, through func(string) bool) bool {
	on := map[string]bool{}
	var walk func(v string, passed bool) bool
	walk = func(v string, passed bool) bool {
		passed = passed || through(v)
		if v == to {
			return passed
		}
		on[v] = true
		defer delete(on, v)
		for _, w := range g[v] {
			if !on[w.to] && walk(w.to, passed) {
				return true
			}
		}
		return false
	}
	return walk(from, false)
}
