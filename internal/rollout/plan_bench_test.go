package rollout

import (
	"fmt"
	"testing"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// Plan's cost for a tenant of 200 nodes (and of 8 beside it) (input sized to hurt): every node
// released and Ready on its target, and then a change to all just admitted
// (every node gated on a new target: the widest wait graph), and that
// change while the backend crash-loops (the upgrade order waits in a loop
// the provisioning order breaks). The figures are in docs/performance.md
// "Input sized to hurt": go test ./internal/rollout -run '^$' -bench Plan -benchmem.
func BenchmarkPlan(b *testing.B) {
	for _, c := range []struct {
		name          string
		size          int
		change, crash bool
		// loop: be's upgrade list names the last frontend, whose
		// defaulted list waits for be and every frontend before it: a
		// loop of upgrade waits only, through every frontend in as many
		// ways as there are subsets of them (the loop search's bound).
		loop bool
		// dense: every node's upgrade list names every other node: loops
		// of upgrade waits only through every pair, the densest wait
		// graph the lists can make.
		dense bool
	}{
		{"every node Ready on its target", 200, false, false, false, false},
		{"a change to all just admitted", 200, true, false, false, false},
		{"a change to all just admitted, the backend crash-looping", 200, true, true, false, false},
		{"8 nodes, a change to all just admitted", 8, true, false, false, false},
		{"a change to all just admitted, the backend's upgrade list naming the last frontend", 200, true, false, true, false},
		{"a change to all just admitted, the backend's upgrade list naming the last frontend, the backend crash-looping", 200, true, true, true, false},
		{"a change to all just admitted, every upgrade list naming every other node", 200, true, false, false, true},
		{"20 nodes, a change to all just admitted, every upgrade list naming every other node, the backend crash-looping", 20, true, true, false, true},
		{"a change to all just admitted, every upgrade list naming every other node, the backend crash-looping", 200, true, true, false, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			w := newWorld(b, "acme")
			w.tenant(c.size, "v1")
			everyNodeReleasedAndReady(w)
			if c.change {
				keys := make([]string, 0, c.size)
				for i := range c.size {
					keys = append(keys, map[bool]string{true: "be", false: fmt.Sprintf("fe%d", i)}[i == 0])
				}
				w.setVersion("v2", keys...)
			}
			if c.loop {
				w.update("be", func(n v2alpha1.Node) {
					n.NodeSpec().DeploymentDependencies.UpgradePrerequisites = []v2alpha1.Prerequisite{prereqOf(w, fmt.Sprintf("fe%d", c.size-1))}
				})
			}
			if c.dense {
				keys := make([]string, 0, c.size)
				for i := range c.size {
					keys = append(keys, map[bool]string{true: "be", false: fmt.Sprintf("fe%d", i)}[i == 0])
				}
				everyUpgradeListNamesEveryOther(w, keys)
			}
			if c.crash {
				w.crash("be")
			}
			s := w.snapshot()
			decisions := Plan(s)
			b.ReportMetric(float64(len(decisions)), "decisions")
			for b.Loop() {
				Plan(s)
			}
		})
	}
}
