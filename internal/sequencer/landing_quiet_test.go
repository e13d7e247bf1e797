package sequencer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A change landing node by node keeps its nodes gated from the first apply;
// the nodes say so in their condition only once the landing has lasted
// landingQuiet, so an apply that lands at once costs no condition write per
// node and per apply.
func TestALandingHoldIsExplainedOnceItLasts(t *testing.T) {
	cases := map[string]struct {
		after         time.Duration
		alreadyHeld   bool
		wantKept      bool
		wantRecheckBy time.Duration
	}{
		"a node held a moment after the landing began keeps its condition and is looked at again when the quiet period ends": {
			after: 300 * time.Millisecond, wantKept: true, wantRecheckBy: landingQuiet - 300*time.Millisecond,
		},
		"a landing that lasts past the quiet period is explained": {
			after: landingQuiet + time.Millisecond,
		},
		"a node already explained as held keeps its explanation current": {
			after: 300 * time.Millisecond, alreadyHeld: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "acme")
			w.tenant(3, v1)
			w.setRolloutID("r1", "be", "fe1", "fe2")
			w.run(100)
			w.setVersion(v2, "fe1")
			w.setRolloutID("r2", "fe1") // fe1 landed; be and fe2 lag
			if tc.alreadyHeld {
				fe1 := w.nodes[w.name("fe1")]
				SetCondition(&fe1.NodeStatus().Conditions, decisionFor(t, w, "fe1").Condition, w.now)
			}
			w.now = w.now.Add(tc.after)
			d := decisionFor(t, w, "fe1")
			assert.True(t, d.Gated, "held by the landing whatever the time")
			assert.Equal(t, v2alpha1.ReasonChangeLanding, d.Condition.Reason, "what it would say")
			assert.Contains(t, d.Condition.Message, "acme-be", "the lagging nodes are named")
			assert.Equal(t, tc.wantKept, d.KeepCondition)
			if tc.wantKept {
				assert.False(t, d.Changed(w.nodes[w.name("fe1")]), "nothing is written while kept")
				assert.Nil(t, d.Event, "nor an Event")
				assert.Equal(t, tc.wantRecheckBy, d.RecheckAfter)
			}
		})
	}
}

func decisionFor(t *testing.T, w *world, key string) Decision {
	t.Helper()
	for _, d := range Plan(w.snapshot()) {
		if d.Node == w.name(key) {
			return d
		}
	}
	require.Failf(t, "no decision", "for %s", key)
	return Decision{}
}
