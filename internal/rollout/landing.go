package rollout

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// landing is the change-grouping verdict for a tenant (DESIGN §4): whether
// its gated nodes are held because a change is still landing node by node.
type landing struct {
	// hold: no gated node may be released yet.
	hold bool
	// reason and message say why, for the held nodes' condition.
	reason, message string
	// recheckAfter: when the hold ends by itself (a timeout), 0 if only a
	// change ends it.
	recheckAfter time.Duration
	// timedOut: the landing timeout passed; releases go on with what landed
	// and say so in a Warning Event.
	timedOut string
	// quietUntil: before then, a node newly held by a rollout-id landing
	// keeps the condition it has (see landingQuiet).
	quietUntil time.Time
	// newest is the rollout-id a change still landing carries ("" when the
	// hold is the settle time: what has landed cannot be known then).
	newest string
	// notRendered are the nodes the newest render does not list
	// (AnnotationRenderedNodes): no part of its landing.
	notRendered map[string]bool
	// renderID is the newest rollout-id, the render notRendered are not in.
	renderID string
	// busyUntil: before then, a node that already explains the landing
	// keeps that explanation: the apply is still going (a node took the
	// newest rollout-id less than landingQuiet ago), and the list of
	// lagging nodes it names is brought up to date once the apply pauses.
	busyUntil time.Time
}

// landingQuiet is how long a change landing node by node (one Helm or Argo
// CD apply) may take before the nodes it holds say so in their condition.
// Most applies land within it: the nodes then go straight to their wait or
// their release, without a condition (and an Event) per node per apply that
// names a list of lagging nodes changing at every apply. Only explanations
// wait: the nodes are gated throughout, whatever the time. A node that
// already explains a landing that goes on likewise keeps its explanation
// while the apply goes on, rather than rewriting the list of lagging nodes
// at every node that lands, and has it brought up to date once no node has
// taken the newest rollout-id for landingQuiet. Three seconds: a fleet-wide
// sync applies a tenant's nodes one by one to an API server that answers
// each in a quarter of a second when saturated (docs/performance.md), so
// an 8-node tenant lands in about two.
const landingQuiet = 3 * time.Second

// landingOf decides change grouping for the tenant. Tenants whose nodes
// carry rollout-id (live ones, and down ones that carry an id) are held
// exactly while the ids disagree, or agree on one older than a node being
// deleted took last (bounded by the landing timeout); tenants without it
// are held for the settle time after their latest change (lastChange), each
// node's changes no longer than the settle cap in all over its run of
// changes (settling).
func (s *Snapshot) landingOf() landing {
	ids := map[string][]string{} // rollout-id → nodes carrying it
	// A node intentionally down still belongs to the render: the change
	// that brings it back up may be the last to land. It counts once it
	// carries an id; a node being deleted does not.
	counts := func(n v2alpha1.Node) bool {
		return n.GetDeletionTimestamp() == nil && (isUp(n) || n.GetAnnotations()[v2alpha1.AnnotationRolloutID] != "")
	}
	newest, newestAt := s.newestRolloutID()
	if newest == "" {
		return s.settling(func(v2alpha1.Node) bool { return true }, "nodes carry no "+v2alpha1.AnnotationRolloutID)
	}
	// A render whose apply reached a node being deleted before any other
	// has begun to land all the same: that node takes no part in the
	// order, but the id it took last is the change landing, and the render
	// it carries says which nodes it renders (one it creates among them).
	var onlyBeingDeleted []string
	// Strictly later: on a tie (or nodes stamped by no webhook) the nodes
	// that count keep the say.
	if id, at, on := s.newestRolloutIDBeingDeleted(); id != "" && id != newest && at.After(newestAt) {
		newest, newestAt, onlyBeingDeleted = id, at, on
	}
	// The newest render may say which nodes it renders: a node it does not
	// list (dropped from the values, and not pruned) is no part of its
	// landing. A node it lists is part of it even before it exists (the
	// render creates it) or while it is down without an id (the render
	// brings it up): it lacks the newest id.
	rendered, notRendered := s.renderedBy(newest)
	for name, n := range s.Nodes {
		id := n.GetAnnotations()[v2alpha1.AnnotationRolloutID]
		switch {
		case rendered != nil && !rendered[name]:
		case counts(n):
			ids[id] = append(ids[id], name)
		case rendered[name] && n.GetDeletionTimestamp() == nil:
			ids[id] = append(ids[id], name) // down without an id, brought up by the render
		}
	}
	for name := range rendered {
		if _, ok := s.Nodes[name]; !ok && name != "" {
			ids[notCreated] = append(ids[notCreated], name)
		}
	}
	l := s.landingByRolloutID(ids, newest, newestAt, onlyBeingDeleted)
	l.notRendered, l.renderID = notRendered, newest
	if l.hold {
		return l
	}
	held := s.settling(changedWithoutNewRolloutID, "changed without a new "+v2alpha1.AnnotationRolloutID)
	if !held.hold {
		return l
	}
	held.timedOut, held.notRendered, held.renderID = l.timedOut, l.notRendered, l.renderID // said when the hold ends
	return held
}

// newestRolloutID returns the rollout-id the tenant's nodes (not being
// deleted) took last, and when a node took it; "" when none carries one.
func (s *Snapshot) newestRolloutID() (newest string, newestAt time.Time) {
	return s.newestRolloutIDOf(func(n v2alpha1.Node) bool { return n.GetDeletionTimestamp() == nil })
}

// newestRolloutIDBeingDeleted returns the rollout-id that nodes being
// deleted took last, when, and the nodes being deleted that carry it; ""
// when none carries one.
func (s *Snapshot) newestRolloutIDBeingDeleted() (newest string, newestAt time.Time, on []string) {
	deleting := func(n v2alpha1.Node) bool { return n.GetDeletionTimestamp() != nil }
	newest, newestAt = s.newestRolloutIDOf(deleting)
	for name, n := range s.Nodes {
		if newest != "" && deleting(n) && n.GetAnnotations()[v2alpha1.AnnotationRolloutID] == newest {
			on = append(on, name)
		}
	}
	slices.Sort(on)
	return newest, newestAt, on
}

// newestRolloutIDOf returns the rollout-id that the nodes of which counts
// says so took last, and when one took it; "" when none carries one.
func (s *Snapshot) newestRolloutIDOf(counts func(v2alpha1.Node) bool) (newest string, newestAt time.Time) {
	for _, n := range s.Nodes {
		id := n.GetAnnotations()[v2alpha1.AnnotationRolloutID]
		if id == "" || !counts(n) {
			continue
		}
		if at := stamp(n, v2alpha1.AnnotationRolloutIDChangedAt); newest == "" || at.After(newestAt) || at.Equal(newestAt) && id > newest {
			newest, newestAt = id, at
		}
	}
	return newest, newestAt
}

// notCreated stands, among the rollout-ids of a landing, for the nodes the
// newest render lists that do not exist yet.
const notCreated = "not created yet"

// renderedBy returns the nodes the render of rollout-id id lists
// (AnnotationRenderedNodes, read from a node that carries id), nil when no
// such node lists them; and the tenant's nodes, not being deleted, that it
// does not list. A list that names no node (empty, or commas and blanks
// alone) is no list: taken for a render of no node, it would leave every
// node out of the landing and hold the tenant, for nothing, until the
// landing timeout (RenderedNodes).
func (s *Snapshot) renderedBy(id string) (rendered, notRendered map[string]bool) {
	for _, n := range s.Nodes {
		if n.GetAnnotations()[v2alpha1.AnnotationRolloutID] != id {
			continue
		}
		if rendered = RenderedNodes(n.GetAnnotations()); rendered != nil {
			break
		}
	}
	if rendered == nil {
		return nil, nil
	}
	for name, n := range s.Nodes {
		if !rendered[name] && n.GetDeletionTimestamp() == nil {
			if notRendered == nil {
				notRendered = map[string]bool{}
			}
			notRendered[name] = true
		}
	}
	return rendered, notRendered
}

// RenderedNodes returns the nodes a node annotated ann says its render
// lists (AnnotationRenderedNodes), blanks left out; nil where it lists
// none.
func RenderedNodes(ann map[string]string) map[string]bool {
	var rendered map[string]bool
	for name := range strings.SplitSeq(ann[v2alpha1.AnnotationRenderedNodes], ",") {
		if name = strings.TrimSpace(name); name != "" {
			if rendered == nil {
				rendered = map[string]bool{}
			}
			rendered[name] = true
		}
	}
	return rendered
}

// changedWithoutNewRolloutID reports whether the node's latest change, of
// its target or its order (lastChange), may have come without a new
// rollout-id: a kubectl edit of a node the chart
// renders, a kubectl apply that drops the id, or a chart whose templates
// changed while its values, which the id hashes, did not. rollout-id cannot
// say whether such a change has landed, so it is grouped by the settle time,
// as on a tenant without rollout-id. A render changes the target and the id
// in one write, which the webhook stamps with one instant; any other pair of
// stamps counts, even when the id changed after the target (a render of the
// id alone): that write may have come between the node-by-node edits of a
// change still landing, and must not end their hold. It costs a render of
// the id alone, within the settle time of a render that changed the target,
// a hold until that settle time has passed.
func changedWithoutNewRolloutID(n v2alpha1.Node) bool {
	return !renderedWithItsID(n.GetAnnotations())
}

// renderedWithItsID reports whether the latest change of a node annotated
// ann came in one write with a new rollout-id (a render): the rollout-id
// groups it, not the settle time.
func renderedWithItsID(ann map[string]string) bool {
	return ann[v2alpha1.AnnotationRolloutID] != "" && lastChange(ann).Equal(stampIn(ann, v2alpha1.AnnotationRolloutIDChangedAt))
}

// landingByRolloutID holds while the nodes that count disagree on their
// rollout-id, or agree on one older than newest, which only nodes being
// deleted (onlyBeingDeleted) carry yet.
func (s *Snapshot) landingByRolloutID(ids map[string][]string, newest string, newestAt time.Time, onlyBeingDeleted []string) landing {
	if len(ids) == 1 && (len(onlyBeingDeleted) == 0 || len(ids[newest]) > 0) {
		return landing{}
	}
	began := newestAt // the first node that carried the newest id
	for _, name := range ids[newest] {
		if at := stamp(s.Nodes[name], v2alpha1.AnnotationRolloutIDChangedAt); !at.IsZero() && at.Before(began) {
			began = at
		}
	}
	quietUntil, busyUntil := began.Add(landingQuiet), newestAt.Add(landingQuiet)
	var lacking []string
	for id, names := range ids {
		if id == newest {
			continue
		}
		for _, name := range names {
			lacking = append(lacking, fmt.Sprintf("%s (%s)", name, orNone(id)))
		}
	}
	slices.Sort(lacking)
	carriers := strings.Join(slices.Sorted(slices.Values(ids[newest])), ", ")
	if len(ids[newest]) == 0 && len(onlyBeingDeleted) > 0 {
		carriers = "only " + strings.Join(onlyBeingDeleted, ", ") + ", being deleted,"
	}
	what := fmt.Sprintf("%s of %d nodes still lack rollout-id %s, which %s carry",
		strings.Join(lacking, ", "), len(lacking)+len(ids[newest]), newest, carriers)
	if s.Grouping.LandingTimeout > 0 {
		wait := newestAt.Add(s.Grouping.LandingTimeout).Sub(s.Now)
		if wait <= 0 {
			return landing{timedOut: fmt.Sprintf("the change did not fully land within the landing timeout (%s): proceeding with what landed; %s",
				s.Grouping.LandingTimeout, what)}
		}
		return landing{hold: true, reason: v2alpha1.ReasonChangeLanding, recheckAfter: wait, quietUntil: quietUntil, busyUntil: busyUntil, newest: newest,
			message: fmt.Sprintf("a change is still landing: %s; held until they agree or the landing timeout (%s) passes at %s",
				what, s.Grouping.LandingTimeout, newestAt.Add(s.Grouping.LandingTimeout).UTC().Format(time.RFC3339))}
	}
	return landing{hold: true, reason: v2alpha1.ReasonChangeLanding, quietUntil: quietUntil, busyUntil: busyUntil, newest: newest,
		message: fmt.Sprintf("a change is still landing: %s; held until they agree", what)}
}

// settling holds a tenant until the latest change (lastChange) of each node
// counted (every node of a tenant without rollout-id; on a tenant with it,
// the nodes whose change came without a new rollout-id) is the settle time
// old — a change applied node by node is then ordered as one — except that
// a node's latest change holds the tenant no longer than the settle cap
// after the start the webhook counted it from
// (AnnotationTargetChangesBeganAt: the change's time less how long the
// earlier changes of its run held the tenant; Admission.runBegan). So the
// changes of a node rewritten forever hold the tenant for the cap in all,
// and then no more, while every other node's changes still hold it; and a
// change long pending elsewhere (a paused node, a rollout stuck for longer
// than the cap) takes nothing from a new change's hold.
//
// A node that left the tenant (deleted, or moved to another tenant), dated
// on the nodes that stay (AnnotationNodeLeftTenantAt), holds it for the
// settle time after it, whatever counted says: a departure is the tenant's
// change, never a render's, and no node's own (no cap: one departure per
// node that leaves; a node deleted and created again in a loop faster
// than the settle time holds the tenant while the loop lasts).
func (s *Snapshot) settling(counted func(v2alpha1.Node) bool, why string) landing {
	if s.Grouping.SettleTime <= 0 {
		return landing{}
	}
	var held, until time.Time // the change that holds longest, and until when
	departure := false        // that change is a node leaving the tenant
	hold := func(at, end time.Time, left bool) {
		// Ties (two changes capped at the same instant) go to the latest
		// change, so the message does not depend on map order.
		if end.After(until) || end.Equal(until) && at.After(held) {
			held, until, departure = at, end, left
		}
	}
	for _, n := range s.Nodes {
		if left := NodeLeftTenantAt(n); !left.IsZero() {
			hold(left, left.Add(s.Grouping.SettleTime), true)
		}
		last := lastChange(n.GetAnnotations())
		if last.IsZero() || !counted(n) {
			continue
		}
		end := last.Add(s.Grouping.SettleTime)
		if began := stamp(n, v2alpha1.AnnotationTargetChangesBeganAt); s.Grouping.SettleCap > 0 && !began.IsZero() && began.Add(s.Grouping.SettleCap).Before(end) {
			end = began.Add(s.Grouping.SettleCap)
		}
		hold(last, end, false)
	}
	wait := until.Sub(s.Now)
	if wait <= 0 {
		return landing{}
	}
	what := fmt.Sprintf("the changes to tenant %s %s", s.Tenant.ClusterName, settleHeldBy(held))
	if departure {
		what, why = fmt.Sprintf("a node left tenant %s at %s", s.Tenant.ClusterName, held.UTC().Format(time.RFC3339)), "deleted, or moved to another tenant"
	}
	return landing{hold: true, reason: v2alpha1.ReasonSettling, recheckAfter: wait,
		message: fmt.Sprintf("holding for %s after %s so that all of a change has landed (%s)"+settleReleasesAt+"%s unless more changes come",
			s.Grouping.SettleTime, what, why, ceilSecond(until).Format(time.RFC3339))}
}

// settleHeldBy names, in a Settling condition's message, when the change
// that holds longest was made (to the second).
func settleHeldBy(change time.Time) string {
	return "(the one holding longest at " + change.UTC().Format(time.RFC3339) + ")"
}

// settleReleasesAt introduces, in a Settling condition's message, when the
// hold ends, rounded up to the second; settleHoldEnd reads it back (a
// change in the fraction rounded up is taken as made while the hold
// holds).
const settleReleasesAt = "; releases at "

// settleHoldEnd returns when a Settling condition said its hold ends (the
// sequencer rewrites it whenever a change extends the hold), zero when it
// says nothing readable.
func settleHoldEnd(c *metav1.Condition) time.Time {
	_, rest, ok := strings.Cut(c.Message, settleReleasesAt)
	if !ok {
		return time.Time{}
	}
	at, _, _ := strings.Cut(rest, " ")
	end, err := time.Parse(time.RFC3339, at)
	if err != nil {
		return time.Time{}
	}
	return end
}

// ceilSecond is t in UTC, rounded up to the second.
func ceilSecond(t time.Time) time.Time {
	t = t.UTC()
	if r := t.Truncate(time.Second); r.Before(t) {
		return r.Add(time.Second)
	}
	return t
}

// NodeLeftTenantAt returns when a node of n's tenant last left it, as
// dated on n (AnnotationNodeLeftTenantAt); zero when never.
func NodeLeftTenantAt(n v2alpha1.Node) time.Time {
	return stamp(n, v2alpha1.AnnotationNodeLeftTenantAt)
}

// FutureDepartures names the nodes of the tenant whose departure date lies
// ahead of the snapshot's now by the settle time or more: a webhook
// replica whose clock ran ahead dated them, and since only a later date
// replaces one, the date would hold the tenant until then — a day, for a
// clock a day ahead. The departure was admitted before now, so the
// sequencer dates it again at now: the tenant is held for the settle time
// from then, no less than from the departure itself. A date ahead by less
// holds the tenant for less than twice the settle time, and is left as it
// is (so is every date when the settle time is off: none holds).
func FutureDepartures(s *Snapshot) []string {
	if s.Grouping.SettleTime <= 0 {
		return nil
	}
	var names []string
	for name, n := range s.Nodes {
		if !NodeLeftTenantAt(n).Before(s.Now.Add(s.Grouping.SettleTime)) {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// stamp reads an RFC 3339 timestamp annotation; zero when absent or malformed.
func stamp(n interface{ GetAnnotations() map[string]string }, key string) time.Time {
	return stampIn(n.GetAnnotations(), key)
}

// stampIn reads an RFC 3339 timestamp from annotations ann (nil reads as
// none); zero when absent or malformed.
func stampIn(ann map[string]string, key string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, ann[key])
	if err != nil {
		return time.Time{}
	}
	return t
}

// notRenderedNote says, in the condition of a node the newest render of
// its tenant's chart does not list, what that means.
func notRenderedNote(newest string) string {
	return fmt.Sprintf("; not in the tenant chart's latest render (rollout-id %s, %s): no part of its changes, it holds none of them",
		orNone(newest), v2alpha1.AnnotationRenderedNodes)
}

func orNone(id string) string {
	if id == "" {
		return "none"
	}
	return id
}

// eventType is the type of the Event that records a release: a Warning
// when the landing timeout made the sequencer proceed with what landed.
func (l landing) eventType() string {
	if l.timedOut != "" {
		return corev1.EventTypeWarning
	}
	return corev1.EventTypeNormal
}
