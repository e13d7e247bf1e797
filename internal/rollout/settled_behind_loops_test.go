package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// The property test takes a tenant held on loops of the user's lists for
// settled only where every node left pending is on a loop its lists make
// or waits, through others, on one. be ↔ fe3 and fe1 ↔ fe2 are two loops
// of upgrade waits alone (be and fe1 name the node their defaulted
// partner waits for). Held as DependencyCycle, the tenant has settled;
// had the planner held fe1 and fe2 as merely waiting for each other (no
// loop named), beside be's loop, it is a deadlock the check must not take
// for settled.
func TestATenantIsSettledBehindLoopsOnlyWhereEveryWaitEndsOnALoopOfItsLists(t *testing.T) {
	w := newWorld(t, "acme")
	w.create("be", v1, upgradeLists(w, "fe3"))
	w.create("fe1", v1, upgradeLists(w, "fe2"))
	w.create("fe2", v1, nil)
	w.create("fe3", v1, nil)
	w.cyclesMaySettle = true
	w.run(400)
	w.setVersion(v2, keysOf(4)...)
	w.run(400)
	var pending []string
	s := w.snapshot()
	for _, k := range keysOf(4) {
		name := w.name(k)
		if s.hasPendingWork(name) {
			pending = append(pending, name)
		}
		c := PrerequisitesCondition(w.nodes[name])
		require.NotNil(t, c, k)
		require.Equal(t, v2alpha1.ReasonDependencyCycle, c.Reason, "%s: %s", k, c.Message)
	}
	require.Len(t, pending, 4)
	assert.True(t, w.settledBehindCycles(pending), "held on two loops of their lists")

	for _, k := range []string{"fe1", "fe2"} {
		c := PrerequisitesCondition(w.nodes[w.name(k)])
		c.Reason, c.Message = v2alpha1.ReasonWaitingForPrerequisite, "waiting"
	}
	assert.False(t, w.settledBehindCycles(pending), "fe1 and fe2 wait for each other beside be's loop, on none")
}
