package rollout

import (
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// Step is one step of a predicted rollout: the nodes Plan releases
// together, in one planning pass.
type Step struct {
	// Nodes are the nodes released in this step, sorted.
	Nodes []string `json:"nodes"`
	// Modes are their modes: provisioning or upgrade.
	Modes map[string]Mode `json:"modes"`
}

// Prediction is the order in which a tenant's gated nodes would be released.
type Prediction struct {
	// Rolling are the nodes already released and not Ready on their target
	// yet; the prediction takes them as finishing first.
	Rolling []string `json:"rolling,omitempty"`
	// Steps are the releases, in order.
	Steps []Step `json:"steps"`
	// Stuck are the decisions of the nodes still gated when nothing more
	// can be released (paused, a cycle, a missing prerequisite).
	Stuck []Decision `json:"stuck,omitempty"`
}

// Preview predicts the order in which the sequencer releases the tenant's
// gated nodes, if every node it releases becomes Ready on its target as soon
// as it is released and nothing else changes: Plan, run again and again on
// a copy of the snapshot. Holds that end by themselves (a change landing, the
// settle time) are taken as over. It is pure: the snapshot is not changed.
func Preview(s *Snapshot) Prediction {
	sim := &Snapshot{
		Tenant: s.Tenant, Orders: s.Orders, Now: s.Now, Nodes: map[string]v2alpha1.Node{}, Pods: map[string][]Pod{},
		SetsConverged: s.SetsConverged, // a rollout its StatefulSet says converged is not rolling
		SetTemplates:  map[string][]Template{},
	}
	for name, n := range s.Nodes {
		n := n.DeepCopyObject().(v2alpha1.Node)
		ann := n.GetAnnotations()
		delete(ann, v2alpha1.AnnotationRolloutID) // the change has landed
		n.SetAnnotations(ann)
		sim.Nodes[name] = n
		sim.Pods[name] = slices.Clone(s.Pods[name])
		if t := s.SetTemplates[name]; t != nil {
			sim.SetTemplates[name] = slices.Clone(t)
		}
	}
	var p Prediction
	for _, name := range sortedNames(sim) {
		if sim.inFlight(name) {
			p.Rolling = append(p.Rolling, name)
			sim.rolledOut(name)
		}
	}
	sim.recoverWhatMayStart()
	for range len(sim.Nodes) + 1 {
		var step Step
		for _, d := range Plan(sim) {
			n := sim.Nodes[d.Node]
			if !Gated(n) || d.Gated || !Live(n) {
				continue
			}
			if step.Modes == nil {
				step.Modes = map[string]Mode{}
			}
			step.Nodes = append(step.Nodes, d.Node)
			step.Modes[d.Node] = sim.mode(d.Node)
		}
		if len(step.Nodes) == 0 {
			break
		}
		for _, name := range step.Nodes {
			sim.rolledOut(name)
		}
		sim.recoverWhatMayStart()
		p.Steps = append(p.Steps, step)
	}
	for _, d := range Plan(sim) {
		if d.Gated && Live(sim.Nodes[d.Node]) {
			p.Stuck = append(p.Stuck, d)
		}
	}
	return p
}

func sortedNames(s *Snapshot) []string {
	names := make([]string, 0, len(s.Nodes))
	for name := range s.Nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// recoverWhatMayStart makes every recovering node whose new pods may start
// Ready again on its target, until none is left: recovery happens between
// releases, in its own order.
func (s *Snapshot) recoverWhatMayStart() {
	for changed := true; changed; {
		changed = false
		for _, name := range sortedNames(s) {
			if s.recovering(name) && !s.inFlight(name) {
				if ok, _ := PodsMayStart(s, name); ok {
					s.rolledOut(name)
					changed = true
				}
			}
		}
	}
}

// rolledOut makes node name released and Ready on its target, as recorded
// by the sequencer.
func (s *Snapshot) rolledOut(name string) {
	n := s.Nodes[name]
	n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
	n.SetGeneration(n.GetGeneration() + 1)
	ann := n.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[v2alpha1.AnnotationReleasedTarget] = StampedTarget(n)
	ann[v2alpha1.AnnotationReleasedGeneration] = strconv.FormatInt(n.GetGeneration(), 10)
	n.SetAnnotations(ann)
	spec := n.NodeSpec()
	s.Pods[name] = []Pod{{
		Name: name + "-preview", Version: spec.ExpressVersion, Revision: spec.DeploymentRevision, Hash: StampedTarget(n),
		Conditions: map[string]string{string(corev1.PodReady): string(corev1.ConditionTrue)},
	}}
	delete(s.SetTemplates, name) // its StatefulSet now makes pods of its target
	SetCondition(&n.NodeStatus().Conditions, metav1.Condition{
		Type: v2alpha1.ConditionPrerequisitesReady, Status: metav1.ConditionTrue, Reason: v2alpha1.ReasonRolloutComplete,
		ObservedGeneration: n.GetGeneration(),
	}, s.Now)
}
