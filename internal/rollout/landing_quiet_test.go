package rollout

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
// node and per apply. A node that already says so keeps what it says while
// nodes go on taking the new rollout-id, and is brought up to date once no
// node has taken it for landingQuiet: not one rewrite per node that lands.
func TestALandingHoldIsExplainedOnceItLasts(t *testing.T) {
	cases := map[string]struct {
		// explainedEarly: fe1 already explains the landing as it stood
		// when only fe1 had landed; fe2 lands after that.
		explainedEarly bool
		// after: how long after the latest node took the new rollout-id
		// fe1 is planned.
		after         time.Duration
		wantKept      bool
		wantRecheckBy time.Duration
	}{
		"a node held a moment after the landing began keeps its condition and is looked at again when the quiet period ends": {
			after: 300 * time.Millisecond, wantKept: true, wantRecheckBy: landingQuiet - 300*time.Millisecond,
		},
		"a landing that lasts past the quiet period is explained": {
			after: landingQuiet + time.Millisecond,
		},
		"a node already explaining the landing keeps its explanation while other nodes go on landing, and is looked at again when they pause": {
			explainedEarly: true, after: 300 * time.Millisecond, wantKept: true, wantRecheckBy: landingQuiet - 300*time.Millisecond,
		},
		"a node already explaining the landing has its explanation brought up to date once no node has landed for the quiet period": {
			explainedEarly: true, after: landingQuiet + time.Millisecond,
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
			if tc.explainedEarly {
				fe1 := w.nodes[w.name("fe1")]
				SetCondition(&fe1.NodeStatus().Conditions, decisionFor(t, w, "fe1").Condition, w.now)
				w.now = w.now.Add(2 * landingQuiet)
				w.setVersion(v2, "fe2")
				w.setRolloutID("r2", "fe2") // fe2 lands later: be alone lags
			}
			w.now = w.now.Add(tc.after)
			d := decisionFor(t, w, "fe1")
			assert.True(t, d.Gated, "held by the landing whatever the time")
			assert.Equal(t, v2alpha1.ReasonChangeLanding, d.Condition.Reason, "what it would say")
			assert.Contains(t, d.Condition.Message, "acme-be (r1)", "the lagging nodes are named")
			if tc.explainedEarly {
				assert.NotContains(t, d.Condition.Message, "acme-fe2 (r1)", "what it would say is up to date")
			}
			assert.Equal(t, tc.wantKept, d.KeepCondition)
			if tc.wantKept {
				assert.False(t, d.Changed(w.nodes[w.name("fe1")]), "nothing is written while kept")
				assert.Nil(t, d.Event, "nor an Event")
				assert.Equal(t, tc.wantRecheckBy, d.RecheckAfter)
			} else {
				assert.True(t, d.Changed(w.nodes[w.name("fe1")]), "the explanation is written")
			}
		})
	}
}

func decisionFor(t *testing.T, w *world, key string) Decision {
	t.Helper()
	return decisionOf(t, Plan(w.snapshot()), w.name(key))
}

// decisionOf returns the decision for node name among decisions, failing
// the test when there is none.
func decisionOf(t *testing.T, decisions []Decision, name string) Decision {
	t.Helper()
	for _, d := range decisions {
		if d.Node == name {
			return d
		}
	}
	require.Failf(t, "no decision", "for %s", name)
	return Decision{}
}
