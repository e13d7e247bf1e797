package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A tenant at a glance (the fleet view): its state, live nodes and those
// on target, what rolls, the node it names next and since when.
func TestProgressSumsUpATenant(t *testing.T) {
	settled := func(w *world) { w.tenant(4, v1); w.run(100) }
	for name, c := range map[string]struct {
		setup              func(w *world)
		state              TenantState
		live, onTarget     int
		rolling            []string
		next, reason, wait string
	}{
		"a settled tenant is done, every live node on target": {
			setup: settled, state: Done, live: 4, onTarget: 4,
		},
		"a change to all rolling fe1 is rolling, and names fe2 waiting for it": {
			setup: func(w *world) {
				settled(w)
				w.setVersion(v2, "be", "fe1", "fe2", "fe3")
				w.step()
			},
			state: Rolling, live: 4, onTarget: 0, rolling: []string{"acme-fe1"}, next: "acme-fe2", reason: v2alpha1.ReasonWaitingForPrerequisite, wait: "acme-fe1",
		},
		"a paused first node holds the tenant": {
			setup: func(w *world) {
				settled(w)
				w.annotate("fe1", v2alpha1.AnnotationPauseRollout, "true")
				w.setVersion(v2, "be", "fe1", "fe2", "fe3")
				w.step()
			},
			state: Held, live: 4, onTarget: 0, next: "acme-fe1", reason: v2alpha1.ReasonRolloutPaused,
		},
		"a frontend change while the backend is being deleted is stuck on it": {
			setup: func(w *world) {
				settled(w)
				w.setVersion(v2, "fe1")
				w.remove("be")
				w.step()
			},
			state: Stuck, live: 3, onTarget: 2, next: "acme-fe1", reason: v2alpha1.ReasonPrerequisiteNotFound, wait: "acme-be",
		},
		"a frontend whose recreated pods wait for the recovering backend is held, named next": {
			setup: func(w *world) {
				settled(w)
				w.crash("be")
				w.evict("fe2")
				w.sequence()
			},
			state: Rolling, live: 4, onTarget: 2, rolling: []string{"acme-be"}, next: "acme-fe2", reason: v2alpha1.ReasonWaitingForPrerequisite, wait: "acme-be",
		},
		"a node down takes no part": {
			setup: func(w *world) {
				settled(w)
				w.update("fe2", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
				w.run(100)
			},
			state: Done, live: 3, onTarget: 3,
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "acme")
			c.setup(w)
			s := w.snapshot()
			p := ProgressOf(s, Plan(s))
			assert.Equal(t, c.state, p.State)
			assert.Equal(t, c.live, p.Live, "live")
			assert.Equal(t, c.onTarget, p.OnTarget, "on target")
			assert.Equal(t, c.rolling, p.Rolling, "rolling")
			named := p.Rolling
			if p.Next != nil {
				named = []string{p.Next.Node}
			}
			if p.State == Done {
				named = nil
				for name, n := range w.nodes {
					if Live(n) {
						named = append(named, name)
					}
				}
			}
			var want time.Time
			for _, name := range named {
				if c := PrerequisitesCondition(w.nodes[name]); c != nil && c.LastTransitionTime.After(want) {
					want = c.LastTransitionTime.Time
				}
			}
			if p.State != Rolling || p.Next == nil {
				assert.Equal(t, want, p.Since, "since the named node's condition took its reason")
			}
			if c.next == "" {
				assert.Nil(t, p.Next)
				return
			}
			if assert.NotNil(t, p.Next) {
				assert.Equal(t, c.next, p.Next.Node)
				assert.Equal(t, c.reason, p.Next.Condition.Reason)
				if c.wait != "" {
					assert.Contains(t, p.Next.WaitingFor, c.wait)
				}
			}
		})
	}
}

// A state the sequencer has not written yet has no age: the stored
// condition still says what the node was before.
func TestProgressHasNoAgeForAReasonNotWrittenYet(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(100)
	w.annotate("fe1", v2alpha1.AnnotationPauseRollout, "true")
	w.setVersion(v2, "be", "fe1", "fe2")
	s := w.snapshot()
	p := ProgressOf(s, Plan(s))
	assert.Equal(t, Held, p.State)
	assert.Equal(t, v2alpha1.ReasonRolloutComplete, PrerequisitesCondition(w.nodes["acme-fe1"]).Reason, "the stored condition is the old one")
	assert.True(t, p.Since.IsZero(), "no age from a condition of another reason: %s", p.Since)
}

// A node the newest render of the tenant's chart does not list is named by
// the fleet view, holds no change, and its condition says why.
func TestANodeTheLatestRenderDoesNotListIsNamedAndHoldsNothing(t *testing.T) {
	w := newWorld(t, "acme")
	settledByRolloutID(5, "r1")(w)
	renderDropping("r2", "fe4", 5)(w)
	s := w.snapshot()
	p := ProgressOf(s, Plan(s))
	assert.Equal(t, []string{w.name("fe4")}, p.NotRendered)
	w.run(200)
	assert.Contains(t, w.condition("fe4").Message, "not in the tenant chart's latest render (rollout-id r2")
	assert.Equal(t, "fe1 fe2 be fe3", w.startedSince(len(w.started)-4))
}
