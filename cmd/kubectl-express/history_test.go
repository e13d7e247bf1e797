package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/golden"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// historyFixture is a tenant's history at a fixed moment: a change under
// way (fe1 and fe2 rolled, be rolling, fe3 waiting for it, fe4 paused) and
// the change before it, done.
func historyFixture(now time.Time) history {
	at := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	node := func(name, kind string, gated, released, ready int, after ...string) rollout.NodeRollout {
		r := rollout.NodeRollout{Node: name, Kind: kind, RolloutRecord: rollout.RolloutRecord{Target: "t-" + name, Gated: at(gated), After: after}}
		if released != 0 {
			r.Released = at(released)
		}
		if ready != 0 {
			r.Ready = at(ready)
		}
		return r
	}
	current := func(r rollout.NodeRollout, reason string, waitingFor ...string) rollout.NodeRollout {
		r.Current, r.Reason, r.WaitingFor = true, reason, waitingFor
		return r
	}
	return history{Namespace: "tenant-1", Tenant: "acme", Rollouts: []rolloutHistory{
		{TenantRollout: rollout.TenantRollout{RolloutID: "9f2c1e7a", Began: at(-120), Nodes: []rollout.NodeRollout{
			current(node("acme-fe1", "Frontend", -120, -119, -95), v2alpha1.ReasonRolloutComplete),
			current(node("acme-fe2", "Frontend", -120, -95, -70, "acme-fe1"), v2alpha1.ReasonRolloutComplete),
			current(node("acme-be", "Backend", -120, -70, 0, "acme-fe2"), v2alpha1.ReasonReleased),
			current(node("acme-fe3", "Frontend", -120, 0, 0), v2alpha1.ReasonWaitingForPrerequisite, "acme-be"),
			current(node("acme-fe4", "Frontend", -120, 0, 0), v2alpha1.ReasonRolloutPaused),
		}}, Events: []historyEvent{
			{Time: at(-119), Node: "acme-fe1", Type: "Normal", Reason: v2alpha1.ReasonReleased, Note: "released: its upgrade prerequisites hold"},
			{Time: at(-70), Node: "acme-be", Type: "Normal", Reason: v2alpha1.ReasonReleased, Note: "released after acme-fe2 was Ready on its target"},
			{Time: at(-70), Node: "acme-fe3", Type: "Normal", Reason: v2alpha1.ReasonWaitingForPrerequisite, Note: "waiting for acme-be (Backend) to be Ready", Count: 3},
			{Time: at(-60), Node: "acme-fe4", Type: "Warning", Reason: v2alpha1.ReasonOrderViolation,
				Note: "pod acme-fe4-0 was created for target 5c1e09aa7f3b (revision 81234) while acme-fe4 was gated (since revision 80112), running 9d02be44c1a0: the Express operator rolled a gated node; it was waiting: held by express.medallia.com/pause-rollout"},
		}, OutOfOrder: 1},
		{TenantRollout: rollout.TenantRollout{RolloutID: "51ab09d3", Began: at(-7200), Ended: at(-7080), Nodes: []rollout.NodeRollout{
			node("acme-be", "Backend", -7200, -7199, -7170),
			node("acme-fe1", "Frontend", -7200, -7170, -7140, "acme-be"),
			node("acme-fe2", "Frontend", -7200, -7140, -7110, "acme-be", "acme-fe1"),
			node("acme-fe3", "Frontend", -7200, -7110, -7090, "acme-be", "acme-fe2"),
			node("acme-fe4", "Frontend", -7200, -7090, -7080, "acme-be", "acme-fe3"),
		}}},
	}}
}

// The history's layout at a fixed moment: the table and timeline in ASCII
// (not a terminal) and in block characters (a terminal), the Gantt chart
// of the rollout under way, and JSON.
func TestTheHistoryIsLaidOutAsItsGoldens(t *testing.T) {
	now := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	h := historyFixture(now)
	golden.Assert(t, "history.table", renderHistory(h, false, now))
	golden.Assert(t, "history.tty", renderHistory(h, true, now))
	golden.Assert(t, "history.mermaid", mermaidGantt(h, h.Rollouts[0], now))
	golden.Assert(t, "history.done.mermaid", mermaidGantt(h, h.Rollouts[1], now))
	data, err := json.MarshalIndent(h, "", "  ")
	require.NoError(t, err)
	golden.Assert(t, "history.json", string(data)+"\n")
}

// Each of the sequencer's Events about the tenant's nodes goes to the
// newest rollout that had begun when it happened (both rollouts hold every
// node here); others' Events, and Events of other nodes, go nowhere.
func TestEventsGoToTheRolloutUnderWayWhenTheyHappened(t *testing.T) {
	now := time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC)
	h := historyFixture(now) // began 01:00:00 and 02:58:00
	rollouts := []rollout.TenantRollout{h.Rollouts[0].TenantRollout, h.Rollouts[1].TenantRollout}
	newer, older := rollouts[0].Began, rollouts[1].Began
	event := func(node, controller string, at time.Time, series *eventsv1.EventSeries) eventsv1.Event {
		return eventsv1.Event{ReportingController: controller, EventTime: metav1.NewMicroTime(at), Series: series,
			Regarding: corev1.ObjectReference{Name: node}, Reason: "Released", Type: "Normal", Note: at.Format(time.TimeOnly)}
	}
	events := []eventsv1.Event{
		event("acme-fe2", v2alpha1.FieldManager, older.Add(time.Minute+time.Second), nil),
		event("acme-fe1", v2alpha1.FieldManager, older.Add(time.Minute), nil),
		event("acme-fe1", "someone-else", older.Add(time.Minute), nil),
		event("other-fe1", v2alpha1.FieldManager, older.Add(time.Minute), nil),
		event("acme-fe1", v2alpha1.FieldManager, older.Add(-time.Minute), nil),
		event("acme-be", v2alpha1.FieldManager, newer.Add(-time.Millisecond), nil),
		event("acme-be", v2alpha1.FieldManager, newer, nil),
		event("acme-fe3", v2alpha1.FieldManager, newer.Add(time.Second), &eventsv1.EventSeries{Count: 4, LastObservedTime: metav1.NewMicroTime(newer.Add(9 * time.Second))}),
	}
	nodes := map[string]bool{"acme-be": true, "acme-fe1": true, "acme-fe2": true, "acme-fe3": true}
	got := eventsOf(rollouts, nodes, events)
	notes := func(list []historyEvent) []string {
		var out []string
		for _, e := range list {
			out = append(out, e.Node+"@"+e.Note)
		}
		return out
	}
	assert.Equal(t, []string{"acme-be@02:58:00", "acme-fe3@02:58:01"}, notes(got[0]), "the newer rollout's, from its beginning")
	assert.Equal(t, []string{"acme-fe1@01:01:00", "acme-fe2@01:01:01", "acme-be@02:57:59"}, notes(got[1]), "the older rollout's, until the newer began, oldest first")
	assert.Equal(t, int32(4), got[0][1].Count)
	assert.Equal(t, newer.Add(9*time.Second), got[0][1].Time, "a series is shown at its last time")
}

// An Event about a node goes to the newest begun rollout the node takes
// part in: fe2, still waiting in the first change, is in no part of a
// second change of fe1 alone.
func TestAnEventGoesToTheRolloutItsNodeTakesPartIn(t *testing.T) {
	base := time.Date(2026, 11, 26, 8, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return base.Add(time.Duration(s) * time.Second) }
	rollouts := []rollout.TenantRollout{
		{Began: at(100), Nodes: []rollout.NodeRollout{{Node: "acme-fe1", Current: true, RolloutRecord: rollout.RolloutRecord{Gated: at(100)}}}},
		{Began: at(0), Nodes: []rollout.NodeRollout{
			{Node: "acme-be", RolloutRecord: rollout.RolloutRecord{Gated: at(0), Released: at(10), Ready: at(20)}},
			{Node: "acme-fe1", RolloutRecord: rollout.RolloutRecord{Gated: at(0), Released: at(30), Ready: at(40)}},
			{Node: "acme-fe2", Current: true, RolloutRecord: rollout.RolloutRecord{Gated: at(0)}},
		}},
	}
	ev := func(node string) eventsv1.Event {
		return eventsv1.Event{EventTime: metav1.NewMicroTime(at(150)), ReportingController: v2alpha1.FieldManager,
			Regarding: corev1.ObjectReference{Name: node}, Reason: v2alpha1.ReasonWaitingForPrerequisite}
	}
	got := eventsOf(rollouts, map[string]bool{"acme-be": true, "acme-fe1": true, "acme-fe2": true, "acme-fe3": true},
		[]eventsv1.Event{ev("acme-fe2"), ev("acme-fe1"), ev("acme-fe3")})
	nodes := func(list []historyEvent) []string {
		var out []string
		for _, e := range list {
			out = append(out, e.Node)
		}
		return out
	}
	assert.Equal(t, []string{"acme-fe1", "acme-fe3"}, nodes(got[0]), "fe1's, and fe3's (in no rollout) by time alone")
	assert.Equal(t, []string{"acme-fe2"}, nodes(got[1]))
}
