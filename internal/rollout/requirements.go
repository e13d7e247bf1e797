package rollout

import (
	"cmp"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// requirement is one live node that must be in a state before another node
// may proceed.
type requirement struct {
	node                 string
	condType, condStatus string
	// upToDate: the node must also be on its own target (upgrade
	// prerequisites).
	upToDate bool
	// version and revision pin what the node must run, when set.
	version, revision string
	// missing: the named node does not exist (reason PrerequisiteNotFound);
	// deleting: it is being deleted, and will not.
	missing, deleting bool
	kind              string
	// otherKind is the kind of the node that has the name of a node of
	// kind that does not exist: a Frontend with the tenant Backend's name
	// is not the Backend, nor is a node of the name an explicit entry lists
	// of another kind than the entry's the one listed.
	otherKind string
	// shared: a Backend and a Frontend are both called node (an explicit
	// entry's): neither can be told to be the one listed, and none of their
	// pods counts — never met, never walked through.
	shared bool
	// via are the intentionally-down nodes this requirement was reached
	// through, in the order walked.
	via []string
}

// blocker is an unmet requirement, said the way the condition shows it.
type blocker struct {
	node    string
	reason  string
	message string
	// upgrade: the requirement comes from the upgrade list.
	upgrade bool
	// pinned: the requirement names a version or revision the node's
	// pods do not run, which it reaches only by rolling out (offPin).
	pinned bool
	// pinAhead: the pin is what the node's own target carries, so its
	// rollout meets it.
	pinAhead bool
	// via are the intentionally-down nodes the requirement was reached
	// through, in the order walked.
	via []string
}

// podsIn counts the pods with condition condType=condStatus, and of those
// the ones running version and revision (empty matches anything).
func podsIn(pods []Pod, condType, condStatus, version, revision string) (inState, total int) {
	for _, p := range pods {
		if p.Conditions[condType] == condStatus &&
			(version == "" || p.Version == version) && (revision == "" || p.Revision == revision) {
			inState++
		}
	}
	return inState, len(pods)
}

// liveKeys returns the keys of the tenant's live nodes (up, not being
// deleted) that have one.
func (s *Snapshot) liveKeys() map[defaults.Key]string {
	keys := map[defaults.Key]string{}
	for name, n := range s.Nodes {
		if k, ok := defaults.KeyOf(n); ok && Live(n) {
			keys[k] = name
		}
	}
	return keys
}

// requirements returns what node name needs before it may proceed: its
// provisioning list, and its upgrade list too when upgrade is set.
func (s *Snapshot) requirements(name string, upgrade bool) []requirement {
	lists := []defaults.List{defaults.ProvisioningList}
	if upgrade {
		lists = append(lists, defaults.UpgradeList)
	}
	var reqs []requirement
	for _, l := range lists {
		reqs = append(reqs, s.listRequirements(name, l, l == defaults.UpgradeList, nil, map[string]bool{name: true})...)
	}
	// A Frontend starts no pod while its tenant has no Backend, in any
	// mode: an upgrade released without one would replace running pods
	// with pods the pod rule then holds (the release and the pod rule
	// decide alike, so the node stays up on its running target instead).
	// A Frontend with the Backend's name is not the Backend: one created
	// beside the Backend hides it (a snapshot holds one node per name; the
	// validating webhook refuses the second, but two created at once can
	// both pass it), and its pods are not the Backend's.
	n := s.Nodes[name]
	if n.NodeKind() == v2alpha1.KindFrontend {
		be := defaults.NodeName(s.Tenant.ClusterName, defaults.Backend)
		switch b, ok := s.Nodes[be]; {
		case !ok:
			reqs = append(reqs, requirement{node: be, kind: v2alpha1.KindBackend, missing: true})
		case b.NodeKind() != v2alpha1.KindBackend:
			reqs = append(reqs, requirement{node: be, kind: v2alpha1.KindBackend, missing: true, otherKind: b.NodeKind()})
		case b.GetDeletionTimestamp() != nil:
			// About to be missing: a release now would start pods the pod
			// rule holds once it is gone.
			reqs = append(reqs, requirement{node: be, kind: v2alpha1.KindBackend, missing: true, deleting: true})
		}
	}
	return reqs
}

// listRequirements resolves list l of node name into live nodes: a
// defaulted list into every live node before it in the reduced order, an
// explicit list entry by entry, walking through intentionally-down nodes and
// nodes being deleted to their own prerequisites. seen guards against loops through down nodes.
func (s *Snapshot) listRequirements(name string, l defaults.List, upToDate bool, via []string, seen map[string]bool) []requirement {
	n := s.Nodes[name]
	var reqs []requirement
	if defaults.IsDefaulted(n, l) {
		k, ok := defaults.KeyOf(n)
		if !ok {
			return nil
		}
		live := s.liveKeys()
		keys := make([]defaults.Key, 0, len(live)+1)
		for lk := range live {
			keys = append(keys, lk)
		}
		if _, ok := live[k]; !ok {
			keys = append(keys, k) // a down node walked through keeps its place
		}
		for _, prev := range l.Order(s.Orders).Sequence(keys) {
			if prev == k {
				break
			}
			reqs = append(reqs, requirement{
				node: live[prev], kind: prev.Kind(), upToDate: upToDate, via: via,
				condType: string(corev1.PodReady), condStatus: string(corev1.ConditionTrue),
			})
		}
		return reqs
	}
	for _, p := range l.Get(n.NodeSpec()) {
		if seen[p.ExpressNode] {
			continue
		}
		dep, ok := s.Nodes[p.ExpressNode]
		switch {
		case !ok:
			reqs = append(reqs, requirement{node: p.ExpressNode, kind: p.Kind, missing: true, via: via})
		case s.SharedNames[p.ExpressNode]:
			reqs = append(reqs, requirement{node: p.ExpressNode, kind: p.Kind, missing: true, shared: true, via: via})
		case p.Kind != "" && dep.NodeKind() != p.Kind:
			// A node of the name, of another kind (made since the entry
			// was admitted): not the node listed, which does not exist.
			reqs = append(reqs, requirement{node: p.ExpressNode, kind: p.Kind, missing: true, via: via, otherKind: dep.NodeKind()})
		case !Live(dep):
			seen[p.ExpressNode] = true
			reqs = append(reqs, s.listRequirements(p.ExpressNode, l, upToDate, append(slices.Clone(via), p.ExpressNode), seen)...)
		default:
			reqs = append(reqs, requirement{
				node: p.ExpressNode, kind: dep.NodeKind(), upToDate: upToDate, via: via,
				// An entry stored without them (no CRD default, no webhook)
				// asks what the CRD's defaults say.
				condType:   cmp.Or(p.PodConditionType, string(corev1.PodReady)),
				condStatus: cmp.Or(p.ConditionStatus, string(corev1.ConditionTrue)),
				version:    p.ExpressVersion, revision: p.DeploymentRevision,
			})
		}
	}
	return reqs
}

// check returns the blocker of a requirement, or false when it holds.
// releasing are the nodes released in the same planning pass: like a node in
// flight, they are about to stop being Ready, so they are Ready for no one.
func (s *Snapshot) check(r requirement, releasing map[string]bool) (b blocker, unmet bool) {
	if r.missing {
		return s.blockerOf(r, ""), true
	}
	defer func() {
		b.pinned = unmet && s.offPin(r)
		if b.pinned {
			spec := s.Nodes[r.node].NodeSpec()
			b.pinAhead = (r.version == "" || r.version == spec.ExpressVersion) && (r.revision == "" || r.revision == spec.DeploymentRevision)
			if !b.pinAhead {
				b.reason = v2alpha1.ReasonPrerequisitePinUnreachable
				b.message += fmt.Sprintf("; its own target is %s, so no rollout of it gets there until the pin or its spec changes", describeTarget(s.Nodes[r.node]))
			}
		}
	}()
	n := s.Nodes[r.node]
	if r.upToDate && Gated(n) || releasing[r.node] || s.inFlight(r.node) {
		return s.blockerOf(r, ""), true // not started, starting now, or under way: Ready for no one
	}
	pods := s.Pods[r.node]
	for _, p := range pods {
		if p.Conditions[r.condType] != r.condStatus ||
			r.version != "" && p.Version != r.version || r.revision != "" && p.Revision != r.revision ||
			r.upToDate && !podOnTarget(n, p) {
			return s.blockerOf(r, ""), true
		}
	}
	if len(pods) == 0 {
		return s.blockerOf(r, ""), true
	}
	if s.MissingPods[r.node] > 0 {
		return s.blockerOf(r, " (its StatefulSet wants more pods than exist)"), true
	}
	return blocker{}, false
}

// offPin reports whether r pins a version or revision that the node's
// pods do not all run: only its rollout can meet it.
func (s *Snapshot) offPin(r requirement) bool {
	if r.version == "" && r.revision == "" {
		return false
	}
	pods := s.Pods[r.node]
	return len(pods) == 0 || slices.ContainsFunc(pods, func(p Pod) bool {
		return r.version != "" && p.Version != r.version || r.revision != "" && p.Revision != r.revision
	})
}

// blockerOf is the blocker of unmet requirement r, its message ending in
// more. It is worked out only for a requirement that is not met: planning
// checks every requirement of every node, most of them met.
func (s *Snapshot) blockerOf(r requirement, more string) blocker {
	who := fmt.Sprintf("%s (%s)", r.node, r.kind)
	if len(r.via) > 0 {
		who += fmt.Sprintf(", through %s which is down", r.via[len(r.via)-1])
	}
	if r.shared {
		shared := sharedNameBlocker(r.node)
		return blocker{node: r.node, reason: shared.reason, message: "waiting for " + who + ": " + shared.message, upgrade: r.upToDate, via: r.via}
	}
	if r.missing {
		what := ": it does not exist"
		switch {
		case r.deleting:
			what = ": it is being deleted"
		case r.otherKind != "" && r.kind == v2alpha1.KindBackend && r.node == defaults.NodeName(s.Tenant.ClusterName, defaults.Backend):
			// The tenant's Backend, whether its own wait or an entry's:
			// the Frontend with its name is to go.
			what = fmt.Sprintf(": it does not exist, a %s has its name (delete that %s: no %s may take the Backend's name)", r.otherKind, r.otherKind, r.otherKind)
		case r.otherKind != "":
			what = fmt.Sprintf(": it does not exist, a %s has its name (the entry names a %s: correct its kind, or its name)", r.otherKind, r.kind)
		}
		return blocker{node: r.node, reason: v2alpha1.ReasonPrerequisiteNotFound, message: "waiting for " + who + what, upgrade: r.upToDate, via: r.via}
	}
	n := s.Nodes[r.node]
	reason := v2alpha1.ReasonWaitingForPrerequisite
	if annotated(n, v2alpha1.AnnotationPauseRollout) && Gated(n) {
		// A pause holds a release, not a rollout under way nor a recovery:
		// only a gated node is held by its pause.
		reason = v2alpha1.ReasonRolloutPaused
		who += " which is paused"
	}
	// The message says whom the node waits for and what that node must
	// reach, not where that node is on its way: it changes when the wait
	// does, not at every step of the node ahead (its own condition says).
	need := "Ready"
	if r.condType != string(corev1.PodReady) || r.condStatus != string(corev1.ConditionTrue) {
		need = fmt.Sprintf("%s=%s", r.condType, r.condStatus)
	}
	switch {
	case r.version != "" || r.revision != "":
		need += " on " + target(r.version, r.revision)
	case r.upToDate:
		need += " on " + describeTarget(n)
	}
	return blocker{node: r.node, reason: reason, message: "waiting for " + who + " to be " + need + more, upgrade: r.upToDate, via: r.via}
}

// readyOnTarget counts the node's pods that are Ready on its target.
func (s *Snapshot) readyOnTarget(name string) int {
	n, count := s.Nodes[name], 0
	for _, p := range s.Pods[name] {
		if p.Conditions[string(corev1.PodReady)] == string(corev1.ConditionTrue) && podOnTarget(n, p) {
			count++
		}
	}
	return count
}

// describeTarget names a node's target for people: its version and
// revision, and the target hash that also covers every other field.
func describeTarget(n v2alpha1.Node) string {
	t := target(n.NodeSpec().ExpressVersion, n.NodeSpec().DeploymentRevision)
	if h := StampedTarget(n); h != "" {
		if t == "" {
			return "target " + h
		}
		return t + " (target " + h + ")"
	}
	return t
}

// target renders a version and revision as "express-e689.154" or
// "express-e689.154 revision 42".
func target(version, revision string) string {
	switch {
	case revision == "":
		return version
	case version == "":
		return "revision " + revision
	}
	return version + " revision " + revision
}
