package main

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// history is a tenant's rollouts as kubectl express history shows them
// (-o json|yaml).
type history struct {
	Namespace string           `json:"namespace"`
	Tenant    string           `json:"tenant"`
	Rollouts  []rolloutHistory `json:"rollouts"`
}

// rolloutHistory is one rollout and the sequencer's Events about its nodes
// still kept by the API server.
type rolloutHistory struct {
	rollout.TenantRollout
	Events []historyEvent `json:"events,omitempty"`
	// OutOfOrder and WouldHaveHeld count the order auditor's Events about
	// the rollout: pods created while their node was gated, and, in audit
	// mode, nodes enforcing would have held.
	OutOfOrder    int `json:"outOfOrder,omitempty"`
	WouldHaveHeld int `json:"wouldHaveHeld,omitempty"`
}

// marked counts the order auditor's findings among r's Events.
func marked(r rolloutHistory) rolloutHistory {
	r.OutOfOrder, r.WouldHaveHeld = 0, 0
	for _, e := range r.Events {
		switch e.Reason {
		case v2alpha1.ReasonOrderViolation:
			r.OutOfOrder++
		case v2alpha1.ReasonWouldHaveHeld:
			r.WouldHaveHeld++
		}
	}
	return r
}

// historyEvent is one of the sequencer's Events about a node.
type historyEvent struct {
	Time   time.Time `json:"time"`
	Node   string    `json:"node"`
	Type   string    `json:"type"`
	Reason string    `json:"reason"`
	Note   string    `json:"note"`
	// Count is how many times it happened, when more than once (the last
	// at Time).
	Count int32 `json:"count,omitempty"`
}

// eventsOf sorts the sequencer's Events about the tenant's nodes into its
// rollouts (newest first, as HistoryOf gives them): each Event goes to the
// newest rollout the node takes part in that had begun when it happened,
// or — about a node in none of those — to the newest that had begun.
// Within a rollout they are oldest first.
func eventsOf(rollouts []rollout.TenantRollout, nodes map[string]bool, events []eventsv1.Event) [][]historyEvent {
	out := make([][]historyEvent, len(rollouts))
	for _, ev := range events {
		if ev.ReportingController != v2alpha1.FieldManager || !nodes[ev.Regarding.Name] {
			continue
		}
		e := historyEvent{Time: ev.EventTime.Time, Node: ev.Regarding.Name, Type: ev.Type, Reason: ev.Reason, Note: ev.Note}
		if ev.Series != nil {
			e.Time, e.Count = ev.Series.LastObservedTime.Time, ev.Series.Count
		}
		begun := func(r rollout.TenantRollout) bool { return !ev.EventTime.Time.Before(r.Began) }
		i := slices.IndexFunc(rollouts, func(r rollout.TenantRollout) bool {
			return begun(r) && slices.ContainsFunc(r.Nodes, func(n rollout.NodeRollout) bool { return n.Node == e.Node })
		})
		if i < 0 {
			i = slices.IndexFunc(rollouts, begun)
		}
		if i >= 0 {
			out[i] = append(out[i], e)
		}
	}
	for _, list := range out {
		slices.SortStableFunc(list, func(a, b historyEvent) int { return a.Time.Compare(b.Time) })
	}
	return out
}

// timelineWidth is the cells of a timeline.
const timelineWidth = 40

// renderHistory prints each rollout: a table of its nodes in the order
// they rolled (gated, released, Ready on target, how long each waited and
// rolled, after whom, and where the current ones stand), a timeline drawn
// in characters (block characters on a terminal), and the Events kept.
func renderHistory(h history, tty bool, now time.Time) string {
	var buf bytes.Buffer
	if len(h.Rollouts) == 0 {
		fmt.Fprintf(&buf, "No rollouts recorded for %s in %s.\n", h.Tenant, h.Namespace)
	}
	for i, r := range h.Rollouts {
		if i > 0 {
			buf.WriteString("\n")
		}
		end, state := r.Ended, "done in "+duration.HumanDuration(r.Ended.Sub(r.Began))
		if end.IsZero() {
			end, state = now, "under way for "+duration.HumanDuration(now.Sub(r.Began))
		}
		id := ""
		if r.RolloutID != "" {
			id = " " + r.RolloutID
		}
		fmt.Fprintf(&buf, "ROLLOUT%s of %s in %s: began %s, %s\n", id, h.Tenant, h.Namespace, r.Began.UTC().Format("2006-01-02 15:04:05 MST"), state)
		if r.OutOfOrder > 0 {
			fmt.Fprintf(&buf, "OUT OF ORDER: %d pods created while their node was gated (OrderViolation Events below)\n", r.OutOfOrder)
		}
		if r.WouldHaveHeld > 0 {
			fmt.Fprintf(&buf, "AUDIT: enforcing would have held %d nodes that started (WouldHaveHeld Events below)\n", r.WouldHaveHeld)
		}
		tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NODE\tGATED\tRELEASED\tREADY\tWAITED\tROLLED\tAFTER\tNOW")
		for _, n := range r.Nodes {
			waited, rolled := span(n.Gated, n.Released, now), "-"
			if !n.Released.IsZero() {
				rolled = span(n.Released, n.Ready, now)
			}
			after, stands := "-", "-"
			if len(n.After) > 0 {
				after = strings.Join(n.After, ",")
			}
			if n.AfterOmitted > 0 {
				after += fmt.Sprintf(",+%d more", n.AfterOmitted)
			}
			if n.Current {
				stands = n.Reason
				if len(n.WaitingFor) > 0 {
					stands += " (" + strings.Join(n.WaitingFor, ",") + ")"
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", n.Node, clock(n.Gated), clock(n.Released), clock(n.Ready), waited, rolled, after, stands)
		}
		_ = tw.Flush() // a bytes.Buffer does not fail
		buf.WriteString(timeline(r, end, tty))
		if len(r.Events) > 0 {
			buf.WriteString("Events:\n")
			tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
			for _, e := range r.Events {
				count := ""
				if e.Count > 1 {
					count = fmt.Sprintf(" (x%d)", e.Count)
				}
				fmt.Fprintf(tw, "  %s\t%s\t%s\t%s%s\n", clock(e.Time), e.Node, e.Reason, e.Note, count)
			}
			_ = tw.Flush()
		}
	}
	fmt.Fprintf(&buf, "\nTimes come from the nodes (their current rollout and the last %d before it); Events only while the API server keeps them (its --event-ttl, 1h by default).\n",
		v2alpha1.RolloutHistoryLength)
	return buf.String()
}

// clock is a time of day in UTC, "-" when unknown.
func clock(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("15:04:05")
}

// span is how long from from to to; with no to, how long until now,
// marked as going on; "-" without from. A Ready time is to the second (a
// condition's lastTransitionTime): one in the second of its release is
// under a second after it.
func span(from, to, now time.Time) string {
	switch {
	case from.IsZero():
		return "-"
	case to.IsZero():
		return duration.HumanDuration(now.Sub(from)) + "+"
	case to.Before(from):
		return "<1s"
	}
	return shortDuration(to.Sub(from))
}

// shortDuration is d to the second, or to the millisecond under one.
func shortDuration(d time.Duration) string {
	if d < time.Second {
		return d.Round(time.Millisecond).String()
	}
	return duration.HumanDuration(d)
}

// timeline draws each node of r as a row of cells from r's beginning to
// end: waiting (gated, not released) then rolling (released, not yet
// Ready on target).
func timeline(r rolloutHistory, end time.Time, tty bool) string {
	wait, roll, idle := ".", "#", " "
	if tty {
		wait, roll = "░", "█"
	}
	total := end.Sub(r.Began)
	cell := func(t time.Time) int {
		if total <= 0 {
			return 0
		}
		c := int(float64(t.Sub(r.Began)) / float64(total) * timelineWidth)
		return min(max(c, 0), timelineWidth)
	}
	width := 0
	for _, n := range r.Nodes {
		width = max(width, len(n.Node))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-*s   %s%s%s\n", width, "", clock(r.Began), strings.Repeat(" ", timelineWidth-16), clock(end))
	for _, n := range r.Nodes {
		gated, released, ready := cell(n.Gated), timelineWidth, timelineWidth
		if n.Gated.IsZero() {
			gated = cell(n.Released)
		}
		if !n.Released.IsZero() {
			released = cell(n.Released)
		}
		if !n.Ready.IsZero() {
			ready = max(cell(n.Ready), released+1) // a rollout shows, however short
		} else if n.Released.IsZero() {
			ready = released
		}
		row := strings.Repeat(idle, gated) + strings.Repeat(wait, released-gated) + strings.Repeat(roll, min(ready, timelineWidth+1)-released)
		fmt.Fprintf(&b, "%-*s  |%s\n", width, n.Node, strings.TrimRight(row, " "))
	}
	legend := "  . waiting  # rolling\n"
	if tty {
		legend = "  ░ waiting  █ rolling\n"
	}
	b.WriteString(legend)
	return b.String()
}

// mermaidGantt draws rollout r as a Mermaid Gantt chart: a row per node,
// its wait and its rollout, in UTC (gated and released to the millisecond,
// Ready to the second).
func mermaidGantt(h history, r rolloutHistory, now time.Time) string {
	const layout = "2006-01-02 15:04:05.000"
	at := func(t time.Time) string { return t.UTC().Format(layout) }
	var b strings.Builder
	b.WriteString("---\ndisplayMode: compact\n---\ngantt\n")
	id := ""
	if r.RolloutID != "" {
		id = " " + r.RolloutID
	}
	fmt.Fprintf(&b, "    title %s in %s, rollout%s from %s UTC\n", h.Tenant, h.Namespace, mermaidText(id), r.Began.UTC().Format("2006-01-02 15:04:05"))
	axis, end := "%H:%M:%S", r.Ended
	if end.IsZero() {
		end = now
	}
	if end.Sub(r.Began) < 10*time.Second {
		axis += ".%L" // seconds alone would label every tick alike
	}
	fmt.Fprintf(&b, "    dateFormat YYYY-MM-DD HH:mm:ss.SSS\n    axisFormat %s\n", axis)
	for _, n := range r.Nodes {
		fmt.Fprintf(&b, "    section %s\n", mermaidText(n.Node))
		start := n.Gated
		if start.IsZero() {
			start = n.Released
		}
		switch {
		case n.Released.IsZero():
			tag := "done"
			if rollout.IsStuckReason(n.Reason) {
				tag = "crit"
			}
			what := n.Reason
			if len(n.WaitingFor) > 0 {
				what += " on " + strings.Join(n.WaitingFor, " ")
			}
			fmt.Fprintf(&b, "    waiting %s :%s, %s, %s\n", mermaidText(what), tag, at(start), at(now))
			continue
		case start.Before(n.Released):
			fmt.Fprintf(&b, "    waited :done, %s, %s\n", at(start), at(n.Released))
		}
		switch {
		case n.Ready.IsZero():
			fmt.Fprintf(&b, "    rolling :active, %s, %s\n", at(n.Released), at(now))
		case n.Ready.Before(n.Released): // Ready is to the second: within the second of the release
			fmt.Fprintf(&b, "    rolled :%s, %s\n", at(n.Released), at(n.Released))
		default:
			fmt.Fprintf(&b, "    rolled :%s, %s\n", at(n.Released), at(n.Ready))
		}
	}
	return b.String()
}

// mermaidText keeps what Mermaid reads as syntax out of a name: a colon
// ends a task's name, a hash starts an entity.
func mermaidText(s string) string {
	return strings.NewReplacer(":", " ", "#", " ", ";", " ").Replace(s)
}
