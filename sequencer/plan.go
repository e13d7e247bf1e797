package sequencer

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// Decision is what the sequencer does about one node.
type Decision struct {
	// Node is the node's name.
	Node string
	// Gated is whether the node must carry the sequencer's gate.
	Gated bool
	// Condition is the PrerequisitesReady condition the node must show
	// (type, status, reason, message, observedGeneration).
	Condition metav1.Condition
	// Event, when set, is worth an Event: the reason or the gate changed.
	Event *Event
	// Mode is the mode of a node with pending work, empty otherwise.
	Mode Mode
	// WaitingFor names the nodes the node waits for, in order.
	WaitingFor []string
	// RecheckAfter asks for another look after this long: a released node
	// whose progress deadline is still ahead.
	RecheckAfter time.Duration
}

// Event is an Event to record on a node.
type Event struct {
	Type    string
	Reason  string
	Message string
}

// Changed reports whether applying the decision changes the node.
func (d Decision) Changed(n v2alpha1.Node) bool {
	if d.Gated != n.NodeSpec().HasGate(v2alpha1.GateSequencer) {
		return true
	}
	c := condition(n)
	return c == nil || c.Status != d.Condition.Status || c.Reason != d.Condition.Reason ||
		c.Message != d.Condition.Message || c.ObservedGeneration != d.Condition.ObservedGeneration
}

// ordinaryWaits are the reasons of a node simply waiting its turn.
var ordinaryWaits = []string{v2alpha1.ReasonSettling, v2alpha1.ReasonWaitingForPrerequisite}

// releasedReasons mark a rollout the sequencer released and that has not
// converged yet: such a node is never gated again for the same rollout.
var releasedReasons = []string{v2alpha1.ReasonReleased, v2alpha1.ReasonPrerequisitesIgnored, v2alpha1.ReasonProgressDeadlineExceeded}

// Plan decides, for every node of the snapshot's tenant, whether it is gated
// and what its PrerequisitesReady condition says. It is pure: the same
// snapshot always gives the same decisions, sorted by node name.
//
// A node is released only when every requirement holds at the moment of the
// snapshot; see doc.go for the state machine.
func Plan(s *Snapshot) []Decision {
	names := make([]string, 0, len(s.Nodes))
	for name := range s.Nodes {
		names = append(names, name)
	}
	slices.Sort(names)

	decisions := make([]Decision, 0, len(names))
	blockersOf := map[string][]blocker{}
	for _, name := range names {
		d, blockers := s.decide(name)
		blockersOf[name] = blockers
		decisions = append(decisions, d)
	}
	markCycles(decisions, blockersOf)
	for i := range decisions {
		decisions[i].Event = eventFor(s.Nodes[decisions[i].Node], decisions[i])
	}
	return decisions
}

func (s *Snapshot) decide(name string) (Decision, []blocker) {
	n := s.Nodes[name]
	spec := n.NodeSpec()
	gated := spec.HasGate(v2alpha1.GateSequencer)
	d := Decision{Node: name}
	set := d.setter(n)
	if !isUp(n) {
		set(false, metav1.ConditionTrue, v2alpha1.ReasonNodeDown, "%s is intentionally down (up: false) and takes no part in the order", name)
		return d, nil
	}
	pending := s.hasPendingWork(name)
	if !pending {
		set(false, metav1.ConditionTrue, v2alpha1.ReasonRolloutComplete, "Ready on %s", target(spec.ExpressVersion, spec.DeploymentRevision))
		return d, nil
	}
	d.Mode = s.mode(name)
	cur := condition(n)
	if !gated && cur != nil && slices.Contains(releasedReasons, cur.Reason) {
		// Released by the sequencer and not converged yet: never gated
		// again for this rollout; only watched against its deadline.
		s.inProgress(n, &d, cur)
		return d, nil
	}
	if annotated(n, v2alpha1.AnnotationIgnorePrerequisites) {
		set(false, metav1.ConditionTrue, v2alpha1.ReasonPrerequisitesIgnored,
			"released for %s without checking prerequisites (%s)", d.Mode, v2alpha1.AnnotationIgnorePrerequisites)
		return d, nil
	}
	if annotated(n, v2alpha1.AnnotationPauseRollout) {
		set(true, metav1.ConditionFalse, v2alpha1.ReasonRolloutPaused, "held by %s", v2alpha1.AnnotationPauseRollout)
		return d, nil
	}
	var blockers []blocker
	reqs := s.requirements(name, d.Mode)
	for _, r := range reqs {
		b, blocked := s.check(r)
		if !blocked {
			continue
		}
		// A node both lists name is reported once, by its stricter
		// (later, upgrade) requirement.
		if i := slices.Index(d.WaitingFor, b.node); i >= 0 {
			blockers[i] = b
			continue
		}
		blockers = append(blockers, b)
		d.WaitingFor = append(d.WaitingFor, b.node)
	}
	if len(blockers) == 0 {
		latest := s.latestChange()
		if wait := latest.Add(s.SettleTime).Sub(s.Now); gated && s.SettleTime > 0 && wait > 0 {
			set(true, metav1.ConditionFalse, v2alpha1.ReasonSettling,
				"prerequisites ready; holding until %s after the latest change to tenant %s (%s) so that all of it has landed",
				s.SettleTime, s.Tenant.ClusterName, latest.Format(time.RFC3339))
			d.RecheckAfter = wait
			return d, nil
		}
		set(false, metav1.ConditionTrue, v2alpha1.ReasonReleased, "released for %s: %s", d.Mode, describeMet(reqs))
		return d, nil
	}
	// The nearest blocker — the last in order, right before this node — is
	// named: it changes only when that node moves, not at every step of
	// the rollout ahead of it, so the condition is rewritten O(1) times.
	nearest := blockers[len(blockers)-1]
	for _, b := range blockers {
		if b.reason != v2alpha1.ReasonWaitingForPrerequisite {
			nearest = b // a missing or paused prerequisite says more
			break
		}
	}
	set(true, metav1.ConditionFalse, nearest.reason, "%s", nearest.message)
	return d, blockers
}

// setter returns a function that sets the decision's gate and condition.
func (d *Decision) setter(n v2alpha1.Node) func(bool, metav1.ConditionStatus, string, string, ...any) {
	return func(gate bool, status metav1.ConditionStatus, reason, format string, args ...any) {
		d.Gated = gate
		d.Condition = metav1.Condition{
			Type: v2alpha1.ConditionPrerequisitesReady, Status: status, Reason: reason,
			Message: fmt.Sprintf(format, args...), ObservedGeneration: n.GetGeneration(),
		}
	}
}

// inProgress watches a released node against its progress deadline.
func (s *Snapshot) inProgress(n v2alpha1.Node, d *Decision, cur *metav1.Condition) {
	set := d.setter(n)
	elapsed := s.Now.Sub(cur.LastTransitionTime.Time)
	if cur.Reason == v2alpha1.ReasonProgressDeadlineExceeded || (s.ProgressDeadline > 0 && elapsed >= s.ProgressDeadline) {
		spec := n.NodeSpec()
		ready, total := podsIn(s.Pods[n.GetName()], string(corev1.PodReady), string(corev1.ConditionTrue), spec.ExpressVersion, spec.DeploymentRevision)
		set(false, metav1.ConditionFalse, v2alpha1.ReasonProgressDeadlineExceeded,
			"released but not Ready on %s within %s: %d/%d pods Ready on target; its dependents stay gated",
			target(spec.ExpressVersion, spec.DeploymentRevision), s.ProgressDeadline, ready, total)
		return
	}
	set(false, cur.Status, cur.Reason, "%s", cur.Message)
	d.Condition.ObservedGeneration = cur.ObservedGeneration
	if s.ProgressDeadline > 0 {
		d.RecheckAfter = s.ProgressDeadline - elapsed
	}
}

// describeMet says which prerequisites a released node found ready.
func describeMet(reqs []requirement) string {
	var met []string
	for _, r := range reqs {
		if !slices.Contains(met, r.node) {
			met = append(met, r.node)
		}
	}
	switch {
	case len(met) == 0:
		return "no live prerequisites"
	case len(met) > 4:
		return fmt.Sprintf("%s and %d more ready", strings.Join(met[:3], ", "), len(met)-3)
	}
	return strings.Join(met, ", ") + " ready"
}

// markCycles finds nodes that hold each other in a loop — each gated and
// waiting for the next — and says so: none of them can ever be released.
func markCycles(decisions []Decision, blockersOf map[string][]blocker) {
	held := map[string]int{}
	for i, d := range decisions {
		if d.Gated && len(blockersOf[d.Node]) > 0 {
			held[d.Node] = i
		}
	}
	// Edges between held nodes only: a node that is not held can progress.
	edges := map[string][]string{}
	for name := range held {
		for _, b := range blockersOf[name] {
			if _, ok := held[b.node]; ok {
				edges[name] = append(edges[name], b.node)
			}
		}
	}
	for name, i := range held {
		if path, ok := loopFrom(name, edges); ok {
			decisions[i].Condition.Reason = v2alpha1.ReasonDependencyCycle
			decisions[i].Condition.Message = fmt.Sprintf(
				"%s wait for each other and can never be released: change a prerequisite or set %s on one of them",
				strings.Join(path, " → "), v2alpha1.AnnotationIgnorePrerequisites)
		}
	}
}

// loopFrom returns a loop along edges from start back to start.
func loopFrom(start string, edges map[string][]string) ([]string, bool) {
	for _, next := range edges[start] {
		if path, ok := pathTo(edges, next, start, map[string]bool{}); ok {
			return append([]string{start}, path...), true
		}
	}
	return nil, false
}

func eventFor(n v2alpha1.Node, d Decision) *Event {
	cur := condition(n)
	gateChanged := d.Gated != n.NodeSpec().HasGate(v2alpha1.GateSequencer)
	if !gateChanged && cur != nil && cur.Reason == d.Condition.Reason {
		return nil
	}
	if d.Condition.Reason == v2alpha1.ReasonRolloutComplete && (cur == nil || !slices.Contains(releasedReasons, cur.Reason)) {
		return nil // steady nodes need no Event; finishing a rollout does
	}
	if !gateChanged && cur != nil && slices.Contains(ordinaryWaits, cur.Reason) && slices.Contains(ordinaryWaits, d.Condition.Reason) {
		return nil // still in line: the first Event of the wait said so
	}
	typ := corev1.EventTypeNormal
	switch d.Condition.Reason {
	case v2alpha1.ReasonProgressDeadlineExceeded, v2alpha1.ReasonDependencyCycle, v2alpha1.ReasonPrerequisiteNotFound:
		typ = corev1.EventTypeWarning
	}
	msg := d.Condition.Message
	if gateChanged && d.Gated {
		msg = "gated: " + msg
	}
	return &Event{Type: typ, Reason: d.Condition.Reason, Message: msg}
}
