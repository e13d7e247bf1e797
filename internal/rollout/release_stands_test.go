package rollout

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A release is judged again as it is written, on the state of that moment
// (ReleaseStands): it stands while that state would release it too, and
// not once a predecessor it relied on has failed since it was planned.
func TestAReleaseStandsOnlyWhileTheStateItMeetsWouldReleaseItToo(t *testing.T) {
	// untilPlanned steps the tenant until a plan releases node key (pods:
	// one of its pods), and returns the pod's name.
	untilPlanned := func(w *world, key string, pods bool) string {
		for range 50 {
			w.operate()
			for _, d := range Plan(w.snapshot()) {
				switch {
				case d.Node != w.name(key):
				case pods && len(d.PodsToRelease) > 0:
					return d.PodsToRelease[0]
				case !pods && !d.Gated && Gated(w.nodes[d.Node]):
					return ""
				}
			}
			w.sequence()
		}
		t.Fatalf("no plan released %s:\n%s", key, w.dump())
		return ""
	}
	for name, c := range map[string]struct {
		setup  func(w *world)
		node   string
		pods   bool
		change func(w *world)
		stands bool
		why    string
	}{
		"a node's release stands on the state it was planned on": {
			setup: func(w *world) { w.setVersion(v2, "be", "fe1", "fe2") }, node: "fe2",
			change: func(*world) {}, stands: true,
		},
		"a node's release does not stand once the predecessor it relied on crashed": {
			setup: func(w *world) { w.setVersion(v2, "be", "fe1", "fe2") }, node: "fe2",
			change: func(w *world) { w.crash("fe1") }, why: "acme-fe1",
		},
		"a node's release does not stand once its pause annotation is set": {
			setup: func(w *world) { w.setVersion(v2, "be", "fe1", "fe2") }, node: "fe2",
			change: func(w *world) { w.annotate("fe2", v2alpha1.AnnotationPauseRollout, "true") }, why: "pause",
		},
		"a recovering node's pod release stands while its predecessors stay Ready": {
			setup: func(w *world) { w.evict("be", "fe1") }, node: "fe1", pods: true,
			change: func(*world) {}, stands: true,
		},
		"a recovering node's pod release does not stand once the backend crashed again": {
			setup: func(w *world) { w.evict("be", "fe1") }, node: "fe1", pods: true,
			change: func(w *world) { w.crash("be") }, why: "acme-be",
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "acme")
			w.tenant(3, v1)
			w.run(100)
			c.setup(w)
			pod := untilPlanned(w, c.node, c.pods)
			c.change(w)
			if c.pods {
				require.True(t, slices.ContainsFunc(w.pods[w.name(c.node)], func(p Pod) bool { return p.Name == pod && p.HeldBySequencer() }))
			}
			stands, why := ReleaseStands(w.snapshot(), w.name(c.node), pod)
			assert.Equal(t, c.stands, stands, why)
			if !c.stands {
				assert.Contains(t, why, c.why)
			}
		})
	}
}

// A sequencer plans the release of fe1's held pod while be is Ready, and is
// frozen before it writes. be crashes, and fe1 is made again (kubectl
// replace --force): its old pod, still held, waits for the garbage
// collector, and is still the pod the write names (the patch tests its UID
// and gates). The guard refuses the release either way: on the node as it
// is, by be's crash; on the node made again, because the old pod does not
// count for it — let go, it would schedule while be is crashed.
func TestAFrozenSequencersPodReleaseDoesNotStandOnceItsNodeIsMadeAgain(t *testing.T) {
	for _, madeAgain := range []bool{false, true} {
		w := newWorld(t, "acme")
		w.tenant(2, v1)
		w.run(100)
		w.evict("be", "fe1")
		fe1 := w.name("fe1")
		pod := ""
		for range 50 {
			w.operate()
			for _, d := range Plan(w.snapshot()) {
				if d.Node == fe1 && len(d.PodsToRelease) > 0 {
					pod = d.PodsToRelease[0]
				}
			}
			if pod != "" {
				break
			}
			w.sequence()
		}
		require.NotEmpty(t, pod, "a plan releases fe1's pod")
		w.crash("be")
		if madeAgain {
			w.recreate("fe1")
			require.True(t, slices.ContainsFunc(w.gone[fe1].pods, func(p Pod) bool { return p.Name == pod && p.HeldBySequencer() }), "the old pod is still there, held")
		}
		stands, why := ReleaseStands(w.snapshot(), fe1, pod)
		assert.False(t, stands, "made again: %v: fe1's pod %s let schedule while be is crashed", madeAgain, pod)
		assert.NotEmpty(t, why, "a refusal says why")
	}
}
