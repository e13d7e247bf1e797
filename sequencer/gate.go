package sequencer

import (
	"k8s.io/apimachinery/pkg/api/equality"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// RolloutTarget returns what the Express operator rolls a node out to: its
// spec without the fields that only say how to order the rollout
// (deploymentDependencies, rolloutGates). An unset up reads as true.
func RolloutTarget(s *v2alpha1.NodeSpec) v2alpha1.NodeSpec {
	t := *s.DeepCopy()
	t.DeploymentDependencies = nil
	t.RolloutGates = nil
	if t.Up == nil {
		up := true
		t.Up = &up
	}
	return t
}

// AdmissionNeedsGate reports whether an admitted spec must carry the
// sequencer's gate: on create of an up node, and on an update of an up node
// whose rollout target changed (which includes up: false → true). old is nil
// on create. Adding the gate at admission closes the race between a spec
// change and the sequencer's first look at it.
func AdmissionNeedsGate(old, updated *v2alpha1.NodeSpec) bool {
	if !updated.IsUp() {
		return false
	}
	if old == nil {
		return true
	}
	return !equality.Semantic.DeepEqual(RolloutTarget(old), RolloutTarget(updated))
}

// AdmissionKeepsGate reports whether an update that drops the sequencer's
// gate must have it put back: only the sequencer releases a node. A
// `kubectl replace`, `helm upgrade --force` or a server-side apply that does
// not know the gate would otherwise release a node out of order. The escape
// hatch for people is the ignore-prerequisites annotation.
func AdmissionKeepsGate(old, updated *v2alpha1.NodeSpec, fieldManager string) bool {
	return old.HasGate(v2alpha1.GateSequencer) && !updated.HasGate(v2alpha1.GateSequencer) &&
		fieldManager != v2alpha1.FieldManager
}
