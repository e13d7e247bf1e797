package rollout_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// The history's cases, each on nodes written through the webhook's rules.
//
// rc is a small cluster: nodes stored as the API server would after the
// webhook's rules (rollout.Admit) — the thing under test — with the
// sequencer's release and Ready record written by hand, as the contract says
// (released-target/-at/-generation in the gate patch, RolloutComplete with a
// second-precision lastTransitionTime).
type rc struct {
	t     *testing.T
	now   time.Time
	nodes map[string]v2alpha1.Node
	hash  map[string]string // the target hash the node's spec has (our own stand-in)
}

func newRC(t *testing.T) *rc {
	return &rc{t: t, now: time.Date(2026, 11, 26, 8, 0, 0, 300e6, time.UTC), nodes: map[string]v2alpha1.Node{}, hash: map[string]string{}}
}

func (c *rc) tick(d time.Duration) { c.now = c.now.Add(d) }

func (c *rc) newNode(key string) v2alpha1.Node {
	var n v2alpha1.Node
	if key == "be" {
		n = &v2alpha1.Backend{}
	} else {
		n = &v2alpha1.Frontend{}
	}
	n.SetName("acme-" + key)
	n.SetNamespace("ns")
	n.NodeSpec().ClusterConfig.ClusterName = "acme"
	return n
}

// write is a user's write: target (hash), rollout-id, up.
func (c *rc) write(key, hash, id string, up bool) {
	name := "acme-" + key
	old, exists := c.nodes[name]
	var n v2alpha1.Node
	if exists {
		n = old.DeepCopyObject().(v2alpha1.Node)
	} else {
		n = c.newNode(key)
		n.SetGeneration(0)
	}
	ann := n.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if id == "" {
		delete(ann, v2alpha1.AnnotationRolloutID)
	} else {
		ann[v2alpha1.AnnotationRolloutID] = id
	}
	n.SetAnnotations(ann)
	u := up
	n.NodeSpec().Up = &u
	a := rollout.Admission{Hash: hash, Now: c.now, SettleTime: 5 * time.Second}
	if exists {
		a.Old, a.OldHash = old, c.hash[name]
	}
	rollout.Admit(n, a)
	specChanged := !exists || hash != c.hash[name] || up != old.NodeSpec().IsUp() ||
		len(n.NodeSpec().RolloutGates) != len(old.NodeSpec().RolloutGates)
	if specChanged {
		n.SetGeneration(n.GetGeneration() + 1)
	}
	c.nodes[name], c.hash[name] = n, hash
}

// release is the sequencer's gate patch of a live node.
func (c *rc) release(key string) {
	n := c.nodes["acme-"+key]
	if !n.NodeSpec().HasGate(v2alpha1.GateSequencer) {
		c.t.Fatalf("%s not gated", key)
	}
	n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
	n.SetGeneration(n.GetGeneration() + 1)
	ann := n.GetAnnotations()
	ann[v2alpha1.AnnotationReleasedTarget] = ann[v2alpha1.AnnotationTargetHash]
	ann[v2alpha1.AnnotationReleasedGeneration] = strconv.FormatInt(n.GetGeneration(), 10)
	ann[v2alpha1.AnnotationReleasedAt] = c.now.UTC().Format(time.RFC3339Nano)
	c.setCond(key, metav1.ConditionTrue, v2alpha1.ReasonReleased)
}

func (c *rc) setCond(key string, st metav1.ConditionStatus, reason string) {
	n := c.nodes["acme-"+key]
	n.NodeStatus().Conditions = []metav1.Condition{{Type: v2alpha1.ConditionPrerequisitesReady, Status: st, Reason: reason,
		ObservedGeneration: n.GetGeneration(), LastTransitionTime: metav1.NewTime(c.now.Truncate(time.Second))}}
}

func (c *rc) ready(key string) { c.setCond(key, metav1.ConditionTrue, v2alpha1.ReasonRolloutComplete) }

// roll: gated nodes released and Ready one after another, in order.
func (c *rc) roll(keys ...string) {
	for _, k := range keys {
		c.tick(time.Second)
		c.release(k)
		c.tick(3 * time.Second)
		c.ready(k)
	}
}

func (c *rc) history() []rollout.TenantRollout {
	s := &rollout.Snapshot{Tenant: rollout.Tenant{Namespace: "ns", ClusterName: "acme"}, Nodes: map[string]v2alpha1.Node{}, Orders: defaults.Builtin()}
	for k, v := range c.nodes {
		s.Nodes[k] = v
	}
	return rollout.HistoryOf(s, nil)
}

func describe(h []rollout.TenantRollout) string {
	var b strings.Builder
	for i, r := range h {
		fmt.Fprintf(&b, "#%d id=%q began=%s ended=%s:", i, r.RolloutID, r.Began.Format("15:04:05.000"), r.Ended.Format("15:04:05.000"))
		for _, n := range r.Nodes {
			fmt.Fprintf(&b, " %s[%s cur=%v g=%s r=%s ready=%s]", strings.TrimPrefix(n.Node, "acme-"), n.Target, n.Current,
				n.Gated.Format("04:05.0"), n.Released.Format("04:05.0"), n.Ready.Format("04:05"))
		}
		b.WriteString("\n")
	}
	return b.String()
}

func groups(h []rollout.TenantRollout) []string {
	var out []string
	for _, r := range h {
		var names []string
		for _, n := range r.Nodes {
			names = append(names, strings.TrimPrefix(n.Node, "acme-")+"@"+n.Target)
		}
		out = append(out, r.RolloutID+":"+strings.Join(names, " "))
	}
	return out
}

// notReleased fails unless node's current rollout in h is not released.
func notReleased(t *testing.T, h []rollout.TenantRollout, node string) {
	t.Helper()
	t.Log("\n" + describe(h))
	for _, r := range h {
		for _, p := range r.Nodes {
			if p.Current && p.Node == node && !p.Released.IsZero() {
				t.Errorf("%s is gated and waiting, yet its current rollout says released at %s (gated %s)", node, p.Released, p.Gated)
			}
		}
	}
}

// settledTenant is a tenant created with rollout-id id, rolled, and left
// alone for a minute.
func settledTenant(t *testing.T, id string) *rc {
	c := newRC(t)
	createTenant(c, id)
	c.tick(time.Minute)
	return c
}

func createTenant(c *rc, id string) {
	for _, k := range []string{"be", "fe1", "fe2", "fe3"} {
		c.write(k, "v1-"+k, id, true)
	}
	c.roll("be", "fe1", "fe2", "fe3")
}

// The chart renders one rollout-id on every node; a frontend-only change
// (r2) changes fe1's target only, but every node's rollout-id.
func TestHistoryKeepsTheRolloutIDANodeWasChangedWithNotTheOneRenderedSince(t *testing.T) {
	c := settledTenant(t, "r1")
	for _, k := range []string{"be", "fe1", "fe2", "fe3"} {
		h := c.hash["acme-"+k]
		if k == "fe1" {
			h = "v2-fe1"
		}
		c.write(k, h, "r2", true)
	}
	c.roll("fe1")
	h := c.history()
	t.Log("\n" + describe(h))
	want := []string{"r2:fe1@v2-fe1", "r1:be@v1-be fe1@v1-fe1 fe2@v1-fe2 fe3@v1-fe3"}
	if got := groups(h); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("groups:\n got %q\nwant %q", got, want)
	}
}

// A rollout superseded while a node was rolling (released, not Ready
// yet): that rollout is over, not under way.
func TestHistoryEndsARolloutReplacedWhileANodeWasRolling(t *testing.T) {
	c := settledTenant(t, "")
	c.write("fe1", "v2", "", true)
	c.tick(time.Second)
	c.release("fe1") // rolling v2, not Ready
	c.tick(10 * time.Second)
	c.write("fe1", "v3", "", true) // superseded by v3
	c.roll("fe1")
	c.tick(time.Hour)
	h := c.history()
	t.Log("\n" + describe(h))
	for i, r := range h {
		if r.Ended.IsZero() {
			t.Errorf("rollout #%d (%v) shows as under way although the tenant finished everything", i, groups(h)[i])
		}
	}
}

// A node brought back up (up false -> true) with its target unchanged:
// gated again, not released yet.
func TestHistoryShowsANodeBroughtBackUpAsNotReleased(t *testing.T) {
	c := settledTenant(t, "")
	c.write("fe2", "v1-fe2", "", false)
	// the sequencer drops the gate of a down node without a record; fe2 had none.
	c.tick(time.Minute)
	c.write("fe2", "v1-fe2", "", true)
	require.True(t, c.nodes["acme-fe2"].NodeSpec().HasGate(v2alpha1.GateSequencer), "fe2 is gated again")
	notReleased(t, c.history(), "acme-fe2")
}

// A change reverted before its release.
func TestHistoryShowsAChangeRevertedBeforeItsReleaseAsNotReleased(t *testing.T) {
	c := settledTenant(t, "")
	c.write("fe1", "v2", "", true)
	c.tick(time.Second)
	c.write("fe1", "v1-fe1", "", true) // revert, still gated
	notReleased(t, c.history(), "acme-fe1")
}

// A node taken down, changed while down, brought back up: its earlier
// (released, Ready) rollout must stay in its history.
func TestHistoryKeepsTheRolloutOfANodeChangedWhileDown(t *testing.T) {
	c := settledTenant(t, "")
	c.write("fe3", "v1-fe3", "", false)
	c.tick(time.Minute)
	c.write("fe3", "v2", "", false)
	c.tick(time.Minute)
	c.write("fe3", "v2", "", true)
	n := c.nodes["acme-fe3"]
	kept := rollout.HistoryIn(n)
	assert.True(t, slices.ContainsFunc(kept, func(r rollout.RolloutRecord) bool { return r.Target == "v1-fe3" }),
		"fe3's released and Ready rollout of v1-fe3 is in no record: history %v, current target %s", kept, n.GetAnnotations()[v2alpha1.AnnotationTargetHash])
}

// The values reverted: the chart renders the rollout-id of an earlier
// render again. r1 changed fe1 only; r2 changed be only; back to r1's values
// changes both fe1 and be back.
func TestHistoryNeverJoinsChangesHoursApartUnderOneRolloutID(t *testing.T) {
	c := newRC(t)
	createTenant(c, "r0")
	set := func(id string, targets map[string]string) {
		for _, k := range []string{"be", "fe1", "fe2", "fe3"} {
			h := c.hash["acme-"+k]
			if v, ok := targets[k]; ok {
				h = v
			}
			c.write(k, h, id, true)
		}
	}
	c.tick(time.Hour)
	set("r1", map[string]string{"fe1": "a-fe1"})
	c.roll("fe1")
	c.tick(time.Hour)
	set("r2", map[string]string{"be": "b-be"})
	c.roll("be")
	c.tick(time.Hour)
	set("r1", map[string]string{"be": "v1-be"}) // r1's values again: fe1 stays a-fe1, be goes back to v1-be
	c.roll("be")
	h := c.history()
	t.Log("\n" + describe(h))
	for _, r := range h {
		if r.Ended.Sub(r.Began) > 2*time.Hour {
			t.Errorf("rollout %q spans %s: two changes joined in one", r.RolloutID, r.Ended.Sub(r.Began))
		}
	}
}

// Grouping alone (records as the webhook would keep them once each
// carries the rollout-id of its own change): fe1 changed in r1 at t0, be in
// r2 at t+1h, then r1's values again change be back at t+2h.
func TestHistoryTellsARolloutIDRenderedAgainFromTheFirst(t *testing.T) {
	base := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	tick := func(m int) time.Time { return base.Add(time.Duration(m) * time.Minute) }
	mk := func(key, id, target string, gated, rel time.Time, hist ...rollout.RolloutRecord) v2alpha1.Node {
		n := (&rc{}).newNode(key)
		data := "["
		for i, r := range hist {
			if i > 0 {
				data += ","
			}
			data += fmt.Sprintf(`{"target":%q,"rolloutID":%q,"gated":%q,"released":%q,"ready":%q}`, r.Target, r.RolloutID,
				r.Gated.Format(time.RFC3339Nano), r.Released.Format(time.RFC3339Nano), r.Ready.Format(time.RFC3339Nano))
		}
		data += "]"
		n.SetAnnotations(map[string]string{v2alpha1.AnnotationRolloutHistory: data, v2alpha1.AnnotationTargetHash: target,
			v2alpha1.AnnotationRolloutID: id, v2alpha1.AnnotationTargetChangedAt: gated.Format(time.RFC3339Nano),
			v2alpha1.AnnotationReleasedTarget: target, v2alpha1.AnnotationReleasedAt: rel.Format(time.RFC3339Nano)})
		return n
	}
	s := &rollout.Snapshot{Nodes: map[string]v2alpha1.Node{}, Orders: defaults.Builtin()}
	s.Nodes["acme-fe1"] = mk("fe1", "r1", "a", tick(0), tick(1))
	s.Nodes["acme-be"] = mk("be", "r1", "v1", tick(120), tick(121),
		rollout.RolloutRecord{Target: "b", RolloutID: "r2", Gated: tick(60), Released: tick(61), Ready: tick(62)})
	h := rollout.HistoryOf(s, nil)
	t.Log("\n" + describe(h))
	if len(h) != 3 {
		t.Errorf("want 3 rollouts (r1 fe1 at 08:00, r2 be at 09:00, r1 again be at 10:00), got %d: %q", len(h), groups(h))
	}
}

// A tenant rolled completely; later fe2 is taken down (NodeDown) and fe3
// crashes (Recovering). Nothing is rolling out.
func TestHistoryShowsAFinishedRolloutFinishedAfterANodeGoesDownOrCrashes(t *testing.T) {
	for _, c := range []struct {
		name string
		do   func(c *rc)
	}{
		{"fe2 taken down", func(c *rc) {
			c.write("fe2", "v1-fe2", "", false)
			c.setCond("fe2", metav1.ConditionTrue, v2alpha1.ReasonNodeDown)
		}},
		{"fe3 crashed", func(c *rc) { c.setCond("fe3", metav1.ConditionFalse, v2alpha1.ReasonRecovering) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRC(t)
			createTenant(r, "")
			r.tick(24 * time.Hour)
			c.do(r)
			h := r.history()
			t.Log("\n" + describe(h))
			if h[0].Ended.IsZero() {
				t.Errorf("the tenant's creation, finished a day ago, shows as under way")
			}
		})
	}
}
