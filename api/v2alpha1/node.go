package v2alpha1

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Node is a Backend or a Frontend: what the webhooks and the sequencer need of
// either kind.
// +kubebuilder:object:generate=false
type Node interface {
	metav1.Object
	runtime.Object
	// NodeSpec returns the node's spec, for reading and changing in place.
	NodeSpec() *NodeSpec
	// NodeStatus returns the node's status, for reading and changing in place.
	NodeStatus() *NodeStatus
	// NodeKind returns KindBackend or KindFrontend.
	NodeKind() string
}

// NodeSpec returns the Backend's spec.
func (b *Backend) NodeSpec() *NodeSpec { return &b.Spec }

// NodeStatus returns the Backend's status.
func (b *Backend) NodeStatus() *NodeStatus { return &b.Status }

// NodeKind returns KindBackend.
func (b *Backend) NodeKind() string { return KindBackend }

// NodeSpec returns the Frontend's spec.
func (f *Frontend) NodeSpec() *NodeSpec { return &f.Spec }

// NodeStatus returns the Frontend's status.
func (f *Frontend) NodeStatus() *NodeStatus { return &f.Status }

// NodeKind returns KindFrontend.
func (f *Frontend) NodeKind() string { return KindFrontend }

// OtherKind is the node kind that is not kind: a Backend's name taken by a
// Frontend, or the reverse.
func OtherKind(kind string) string {
	if kind == KindBackend {
		return KindFrontend
	}
	return KindBackend
}

// NewNode returns an empty node of the given kind, or nil for any other kind.
func NewNode(kind string) Node {
	switch kind {
	case KindBackend:
		return &Backend{}
	case KindFrontend:
		return &Frontend{}
	}
	return nil
}

// IsUp reports whether the node is meant to run; an unset up means true.
func (s *NodeSpec) IsUp() bool { return s.Up == nil || *s.Up }

// HasGate reports whether the named rollout gate is present.
func (s *NodeSpec) HasGate(name string) bool {
	return slices.ContainsFunc(s.RolloutGates, func(g RolloutGate) bool { return g.Name == name })
}

// AddGate adds the named rollout gate; it reports whether the spec changed.
func (s *NodeSpec) AddGate(name string) bool {
	if s.HasGate(name) {
		return false
	}
	s.RolloutGates = append(s.RolloutGates, RolloutGate{Name: name})
	return true
}

// RemoveGate removes the named rollout gate; it reports whether the spec
// changed. The list becomes nil when it empties, so no empty list is stored.
func (s *NodeSpec) RemoveGate(name string) bool {
	if !s.HasGate(name) {
		return false
	}
	s.RolloutGates = slices.DeleteFunc(s.RolloutGates, func(g RolloutGate) bool { return g.Name == name })
	if len(s.RolloutGates) == 0 {
		s.RolloutGates = nil
	}
	return true
}

// IsGated reports whether the Express operator must hold the node: while any
// rollout gate is present it must neither roll out nor (re)provision it.
// This is the one check the Express operator needs to honour the sequencer.
func IsGated(n Node) bool { return len(n.NodeSpec().RolloutGates) > 0 }
