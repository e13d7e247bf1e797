package sequencer

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/defaults"
)

// Mode is how a node with pending work is rolled: provisioned (it is not
// Ready: new, crashed, coming back up) or upgraded (Ready, new target).
type Mode string

// The two modes.
const (
	ModeProvisioning Mode = "provisioning"
	ModeUpgrade      Mode = "upgrade"
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
	// missing: the named node does not exist (reason PrerequisiteNotFound).
	missing bool
	kind    string
	// via is the intentionally-down node this requirement was reached
	// through, for messages.
	via string
}

// blocker is an unmet requirement, said the way the condition shows it.
type blocker struct {
	node    string
	reason  string
	message string
}

func isUp(n v2alpha1.Node) bool { return n.NodeSpec().IsUp() }

func annotated(n v2alpha1.Node, key string) bool { return n.GetAnnotations()[key] == "true" }

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

// isReady: at least one pod, and every pod Ready.
func (s *Snapshot) isReady(name string) bool {
	ok, total := podsIn(s.Pods[name], string(corev1.PodReady), string(corev1.ConditionTrue), "", "")
	return total > 0 && ok == total
}

// onTarget: the node is not gated and every pod runs its target version and
// revision. A gated node has a target it has not started rolling.
func (s *Snapshot) onTarget(name string) bool {
	n := s.Nodes[name]
	if n.NodeSpec().HasGate(v2alpha1.GateSequencer) {
		return false
	}
	for _, p := range s.Pods[name] {
		if p.Version != n.NodeSpec().ExpressVersion || p.Revision != n.NodeSpec().DeploymentRevision {
			return false
		}
	}
	return true
}

// hasPendingWork: up, and gated or not (Ready and on target).
func (s *Snapshot) hasPendingWork(name string) bool {
	n := s.Nodes[name]
	return isUp(n) && (n.NodeSpec().HasGate(v2alpha1.GateSequencer) || !s.isReady(name) || !s.onTarget(name))
}

func (s *Snapshot) mode(name string) Mode {
	if s.isReady(name) {
		return ModeUpgrade
	}
	return ModeProvisioning
}

// liveKeys returns the keys of the tenant's live (up) nodes that have one.
func (s *Snapshot) liveKeys() map[defaults.Key]string {
	live := map[defaults.Key]string{}
	for name, n := range s.Nodes {
		if k, ok := defaults.KeyOf(n); ok && isUp(n) {
			live[k] = name
		}
	}
	return live
}

// requirements returns what node name needs before it may proceed in mode.
func (s *Snapshot) requirements(name string, mode Mode) []requirement {
	lists := []defaults.List{defaults.ProvisioningList}
	if mode == ModeUpgrade {
		lists = append(lists, defaults.UpgradeList)
	}
	var reqs []requirement
	for _, l := range lists {
		reqs = append(reqs, s.listRequirements(name, l, l == defaults.UpgradeList, "", map[string]bool{name: true})...)
	}
	n := s.Nodes[name]
	if mode == ModeProvisioning && n.NodeKind() == v2alpha1.KindFrontend {
		be := defaults.NodeName(s.Tenant.ClusterName, defaults.Backend)
		if _, ok := s.Nodes[be]; !ok {
			reqs = append(reqs, requirement{node: be, kind: v2alpha1.KindBackend, missing: true})
		}
	}
	return reqs
}

// listRequirements resolves list l of node name into live nodes: a
// defaulted list into every live node before it in the reduced order, an
// explicit list entry by entry, walking through intentionally-down nodes to
// their own prerequisites. seen guards against loops through down nodes.
func (s *Snapshot) listRequirements(name string, l defaults.List, upToDate bool, via string, seen map[string]bool) []requirement {
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
		case !isUp(dep):
			seen[p.ExpressNode] = true
			reqs = append(reqs, s.listRequirements(p.ExpressNode, l, upToDate, p.ExpressNode, seen)...)
		default:
			reqs = append(reqs, requirement{
				node: p.ExpressNode, kind: dep.NodeKind(), upToDate: upToDate, via: via,
				condType: p.PodConditionType, condStatus: p.ConditionStatus,
				version: p.ExpressVersion, revision: p.DeploymentRevision,
			})
		}
	}
	return reqs
}

// check returns the blocker of a requirement, or false when it holds.
func (s *Snapshot) check(r requirement) (blocker, bool) {
	who := fmt.Sprintf("%s (%s)", r.node, r.kind)
	if r.via != "" {
		who += fmt.Sprintf(", through %s which is down", r.via)
	}
	if r.missing {
		return blocker{r.node, v2alpha1.ReasonPrerequisiteNotFound, fmt.Sprintf("waiting for %s: it does not exist", who)}, true
	}
	n := s.Nodes[r.node]
	version, revision := r.version, r.revision
	if r.upToDate {
		if version == "" {
			version = n.NodeSpec().ExpressVersion
		}
		if revision == "" {
			revision = n.NodeSpec().DeploymentRevision
		}
	}
	ok, total := podsIn(s.Pods[r.node], r.condType, r.condStatus, version, revision)
	gated := r.upToDate && n.NodeSpec().HasGate(v2alpha1.GateSequencer)
	if total > 0 && ok == total && !gated {
		return blocker{}, false
	}
	reason := v2alpha1.ReasonWaitingForPrerequisite
	if annotated(n, v2alpha1.AnnotationPauseRollout) {
		reason = v2alpha1.ReasonRolloutPaused
		who += " which is paused"
	}
	if gated {
		return blocker{r.node, reason, fmt.Sprintf("waiting for %s: its own rollout to %s has not started (gated)",
			who, target(n.NodeSpec().ExpressVersion, n.NodeSpec().DeploymentRevision))}, true
	}
	state := fmt.Sprintf("%d/%d pods %s", ok, total, r.condType)
	if r.condStatus != string(corev1.ConditionTrue) {
		state = fmt.Sprintf("%d/%d pods %s=%s", ok, total, r.condType, r.condStatus)
	}
	if version != "" || revision != "" {
		state += " on " + target(version, revision)
	}
	if total == 0 {
		state = "no pods yet"
	}
	return blocker{r.node, reason, fmt.Sprintf("waiting for %s: %s", who, state)}, true
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
