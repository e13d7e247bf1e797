package rollout

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

func TestRolloutHistoryKeptByAdmission(t *testing.T) {
	now := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	gated, released, ready := now.Add(-time.Hour), now.Add(-50*time.Minute), now.Add(-45*time.Minute)
	// stored is acme-fe2 as stored: gated for target h1 at gated, and —
	// when released — released for it after acme-fe1 and recorded Ready.
	stored := func(releasedFor string, history []RolloutRecord) v2alpha1.Node {
		n := &v2alpha1.Frontend{}
		n.SetName("acme-fe2")
		n.SetGeneration(4)
		n.SetAnnotations(map[string]string{
			v2alpha1.AnnotationTargetHash: "h1", v2alpha1.AnnotationRolloutID: "r1",
			v2alpha1.AnnotationTargetChangedAt: at(gated),
		})
		if releasedFor != "" {
			ann := n.GetAnnotations()
			ann[v2alpha1.AnnotationReleasedTarget] = releasedFor
			ann[v2alpha1.AnnotationReleasedAt] = at(released)
			ann[v2alpha1.AnnotationReleasedGeneration] = "4"
			ann[v2alpha1.AnnotationReleasedAfter] = `{"acme-fe1":"uid-1/3"}`
			n.Status.Conditions = []metav1.Condition{{Type: v2alpha1.ConditionPrerequisitesReady, Status: metav1.ConditionTrue,
				Reason: v2alpha1.ReasonRolloutComplete, ObservedGeneration: 4, LastTransitionTime: metav1.NewTime(ready)}}
		}
		if history != nil {
			data, err := json.Marshal(history)
			require.NoError(t, err)
			n.GetAnnotations()[v2alpha1.AnnotationRolloutHistory] = string(data)
		}
		return n
	}
	h1 := RolloutRecord{Target: "h1", RolloutID: "r1", Gated: gated, Released: released, Ready: ready, Replaced: now, Converged: ptr.To(true), After: []string{"acme-fe1"}}
	older := func(i int) RolloutRecord {
		return RolloutRecord{Target: fmt.Sprintf("h0-%d", i), Gated: gated.Add(-time.Duration(10-i) * time.Hour)}
	}
	for _, c := range []struct {
		name string
		old  v2alpha1.Node
		hash string
		// edit is the user's write.
		edit func(n v2alpha1.Node)
		want []RolloutRecord
	}{
		{name: "a new target keeps the rollout it replaces: target, rollout-id, gated, released, Ready and after whom",
			old: stored("h1", nil), hash: "h2", want: []RolloutRecord{h1}},
		{name: "a target the node was never released for is not kept: it rolled nothing out",
			old: stored("h0", nil), hash: "h2"},
		{name: "a write that does not change the target keeps the history as it is",
			old: stored("h1", []RolloutRecord{older(1)}), hash: "h1", want: []RolloutRecord{older(1)}},
		{name: "the history keeps the last five rollouts, oldest first",
			old: stored("h1", []RolloutRecord{older(1), older(2), older(3), older(4), older(5)}), hash: "h2",
			want: []RolloutRecord{older(2), older(3), older(4), older(5), h1}},
		{name: "a kept record names the first 32 prerequisites its release relied on and counts the rest",
			old: func() v2alpha1.Node {
				n := stored("h1", nil)
				after := map[string]string{}
				for i := range 1000 {
					after[fmt.Sprintf("acme-fe%04d", i)] = "uid/1"
				}
				data, err := json.Marshal(after)
				require.NoError(t, err)
				n.GetAnnotations()[v2alpha1.AnnotationReleasedAfter] = string(data)
				return n
			}(), hash: "h2", want: []RolloutRecord{{Target: "h1", RolloutID: "r1", Gated: gated, Released: released, Ready: ready, Replaced: now, Converged: ptr.To(true),
				After: func() []string {
					var names []string
					for i := range 32 {
						names = append(names, fmt.Sprintf("acme-fe%04d", i))
					}
					return names
				}(), AfterOmitted: 968}}},
		{name: "the history stays under 16 KiB, dropping its oldest records",
			old: stored("h1", []RolloutRecord{{Target: strings.Repeat("a", 10000)}, {Target: strings.Repeat("b", 7000)}}), hash: "h2",
			want: []RolloutRecord{{Target: strings.Repeat("b", 7000)}, h1}},
		{name: "a user's write to the history is dropped",
			old: stored("h1", []RolloutRecord{older(1)}), hash: "h1",
			edit: func(n v2alpha1.Node) { n.GetAnnotations()[v2alpha1.AnnotationRolloutHistory] = `[{"target":"forged"}]` },
			want: []RolloutRecord{older(1)}},
		{name: "a user's write of released-at is dropped",
			old: stored("h1", nil), hash: "h1",
			edit: func(n v2alpha1.Node) { n.GetAnnotations()[v2alpha1.AnnotationReleasedAt] = at(now) }},
		{name: "a rollout not recorded Ready for its released generation is kept without a Ready time",
			old: func() v2alpha1.Node {
				n := stored("h1", nil)
				n.GetAnnotations()[v2alpha1.AnnotationReleasedGeneration] = "5"
				return n
			}(), hash: "h2", want: []RolloutRecord{{Target: "h1", RolloutID: "r1", Gated: gated, Released: released, Replaced: now, Converged: ptr.To(false), After: []string{"acme-fe1"}}}},
		{name: "a rollout recovering from a crash since it was recorded Ready is kept converged, without a Ready time",
			old: func() v2alpha1.Node {
				n := stored("h1", nil)
				n.NodeStatus().Conditions[0].Reason = v2alpha1.ReasonWaitingForPrerequisite
				return n
			}(), hash: "h2", want: []RolloutRecord{{Target: "h1", RolloutID: "r1", Gated: gated, Released: released, Replaced: now, Converged: ptr.To(true), After: []string{"acme-fe1"}}}},
		{name: "a rollout still under way when replaced is kept not converged",
			old: func() v2alpha1.Node {
				n := stored("h1", nil)
				n.NodeStatus().Conditions[0].Reason = v2alpha1.ReasonReleased
				return n
			}(), hash: "h2", want: []RolloutRecord{{Target: "h1", RolloutID: "r1", Gated: gated, Released: released, Replaced: now, Converged: ptr.To(false), After: []string{"acme-fe1"}}}},
		{name: "a rollout its release recorded converged (nothing to roll) is kept converged",
			old: func() v2alpha1.Node {
				n := stored("h1", nil)
				n.SetUID("uid-2")
				n.NodeStatus().Conditions[0].Reason = v2alpha1.ReasonReleased
				n.GetAnnotations()[v2alpha1.AnnotationReleasedAfter] = `{"acme-fe1":"uid-1/3","acme-fe2":"uid-2/4"}`
				return n
			}(), hash: "h2", want: []RolloutRecord{{Target: "h1", RolloutID: "r1", Gated: gated, Released: released, Replaced: now, Converged: ptr.To(true), After: []string{"acme-fe1"}}}},
		{name: "a rollout replaced by bringing the node back up is kept down",
			old: func() v2alpha1.Node {
				n := stored("h1", nil)
				n.NodeSpec().Up = ptr.To(false)
				n.NodeStatus().Conditions[0].Reason = v2alpha1.ReasonNodeDown
				return n
			}(), hash: "h1", edit: func(n v2alpha1.Node) { n.NodeSpec().Up = nil },
			want: []RolloutRecord{{Target: "h1", RolloutID: "r1", Gated: gated, Released: released, Replaced: now, Converged: ptr.To(false), Down: true, After: []string{"acme-fe1"}}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := c.old.DeepCopyObject().(v2alpha1.Node)
			if c.edit != nil {
				c.edit(n)
			}
			Admit(n, Admission{Old: c.old, OldHash: "h1", Hash: c.hash, Now: now})
			assert.Equal(t, c.want, HistoryIn(n))
			assert.Equal(t, c.old.GetAnnotations()[v2alpha1.AnnotationReleasedAt], n.GetAnnotations()[v2alpha1.AnnotationReleasedAt], "released-at is the sequencer's")
		})
	}
}

// A tenant created, changed twice, and held in its third change by a
// paused node: its history is its three rollouts, newest first, each node
// in the order the operator started rolling it (the world's record, not
// the sequencer's), each released only after the one before it was Ready.
func TestHistoryOfATenantIsItsRolloutsInTheOrderTheyRolled(t *testing.T) {
	w := newWorld(t, "acme")
	keys := keysOf(5)
	w.tenant(5, v1)
	w.run(200)
	created := strings.Join(w.started, " ")
	mark := len(w.started)
	w.setVersion(v2, keys...)
	w.run(200)
	changed := w.startedSince(mark)
	mark = len(w.started)
	w.annotate("fe2", v2alpha1.AnnotationPauseRollout, "true")
	w.setConfig("c3", keys...)
	for range 30 {
		w.step()
	}
	held := w.startedSince(mark)
	require.Equal(t, "fe1", held, "fe1 rolls, the paused fe2 holds the rest")

	s := w.snapshot()
	history := HistoryOf(s, Plan(s))
	require.Len(t, history, 3)
	for i, want := range []string{held + " fe2 be fe3 fe4", changed, created} {
		got := history[i]
		var order []string
		for _, n := range got.Nodes {
			order = append(order, w.key(n.Node))
		}
		assert.Equal(t, want, strings.Join(order, " "), "rollout %d (newest first)", i)
		for j := 1; j < len(got.Nodes); j++ {
			prev, n := got.Nodes[j-1], got.Nodes[j]
			if !n.Released.IsZero() {
				assert.False(t, n.Released.Before(prev.Ready), "%s released before %s was Ready", n.Node, prev.Node)
			}
		}
		if i > 0 {
			assert.False(t, history[i].Ended.IsZero(), "a finished rollout has ended")
			assert.False(t, history[i-1].Began.Before(history[i].Ended), "rollout %d began before rollout %d ended", i-1, i)
		}
	}
	current := history[0]
	assert.True(t, current.Ended.IsZero(), "the held rollout has not ended")
	assert.False(t, current.Nodes[0].Ready.IsZero(), "fe1 is Ready on its new target")
	fe2 := current.Nodes[1]
	assert.True(t, fe2.Current)
	assert.True(t, fe2.Released.IsZero())
	assert.Equal(t, v2alpha1.ReasonRolloutPaused, fe2.Reason)
	be := current.Nodes[2]
	assert.Equal(t, v2alpha1.ReasonRolloutPaused, be.Reason, "a pause holds everything after the paused node")
	assert.Equal(t, []string{w.name("fe2")}, be.WaitingFor)
	for _, n := range history[1].Nodes {
		if w.key(n.Node) == "fe2" {
			assert.Contains(t, n.After, w.name("fe1"), "fe2's upgrade relied on fe1's converged rollout")
		}
		assert.False(t, n.Current, "an earlier rollout comes from the history")
	}
}

// Without rollout-id, a node changed after the tenant's change began to
// be released is another change; with one, the rollout-id says it.
func TestHistoryGroupsChangesByRolloutIDOrByTheirFirstRelease(t *testing.T) {
	base := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	tick := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	node := func(name, id string, records ...RolloutRecord) v2alpha1.Node {
		n := &v2alpha1.Frontend{}
		n.SetName(name)
		n.Spec.ClusterConfig.ClusterName = "acme"
		data, err := json.Marshal(records)
		require.NoError(t, err)
		n.SetAnnotations(map[string]string{v2alpha1.AnnotationRolloutHistory: string(data), v2alpha1.AnnotationTargetHash: "now",
			v2alpha1.AnnotationRolloutID: id, v2alpha1.AnnotationTargetChangedAt: at(tick(100))})
		return n
	}
	for _, c := range []struct {
		name  string
		nodes []v2alpha1.Node
		// want is each rollout's nodes (before the current one), oldest first.
		want []string
	}{
		{name: "changes without rollout-id gated before the first release are one change",
			nodes: []v2alpha1.Node{
				node("acme-fe1", "", RolloutRecord{Target: "a", Gated: tick(0), Released: tick(5)}),
				node("acme-fe2", "", RolloutRecord{Target: "a", Gated: tick(4), Released: tick(9)}),
			},
			want: []string{"acme-fe1 acme-fe2"}},
		{name: "a change without rollout-id gated after the first release is another change",
			nodes: []v2alpha1.Node{
				node("acme-fe1", "", RolloutRecord{Target: "a", Gated: tick(0), Released: tick(5)}),
				node("acme-fe2", "", RolloutRecord{Target: "b", Gated: tick(6), Released: tick(9)}),
			},
			want: []string{"acme-fe1", "acme-fe2"}},
		{name: "nodes of one rollout-id are one change however far apart they were gated",
			nodes: []v2alpha1.Node{
				node("acme-fe1", "r2", RolloutRecord{Target: "a", RolloutID: "r1", Gated: tick(0), Released: tick(5)}),
				node("acme-fe2", "r2", RolloutRecord{Target: "a", RolloutID: "r1", Gated: tick(60), Released: tick(70)}),
			},
			want: []string{"acme-fe1 acme-fe2"}},
		{name: "a node's two rollouts of the same rollout-id are two changes",
			nodes: []v2alpha1.Node{
				node("acme-fe1", "r2",
					RolloutRecord{Target: "a", RolloutID: "r1", Gated: tick(0), Released: tick(5)},
					RolloutRecord{Target: "b", RolloutID: "r1", Gated: tick(20), Released: tick(25)}),
			},
			want: []string{"acme-fe1", "acme-fe1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := &Snapshot{Nodes: map[string]v2alpha1.Node{}}
			for _, n := range c.nodes {
				s.Nodes[n.GetName()] = n
			}
			history := HistoryOf(s, nil)
			require.Len(t, history, len(c.want)+1, "the current change and the earlier ones")
			var got []string
			for i := len(history) - 1; i >= 1; i-- {
				var names []string
				for _, n := range history[i].Nodes {
					names = append(names, n.Node)
				}
				got = append(got, strings.Join(names, " "))
			}
			assert.Equal(t, c.want, got)
		})
	}
}
