package rollout

import (
	"maps"
	"slices"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// This file says what the parts of a plan that need fresh state rest on: a
// release (of a node, or of its pods) rests on the node itself and on every
// node it requires, and the records written with it (released-set-revision,
// released-after) and a RolloutComplete record rest on the StatefulSets of
// those nodes — a record the release guard does not judge, and that the
// cache, which holds no StatefulSets, cannot prove.

// ScopeOf returns, sorted, the nodes of s that the releases and
// RolloutComplete records of a plan of s rest on: each such decision's node,
// the nodes its requirements name in both lists (those walked through
// included), the nodes its released-after record names, and, for a
// Frontend, the tenant's Backend. Only nodes of s are returned: a name no
// node has has no workload to read.
func ScopeOf(s *Snapshot, decisions []Decision) []string {
	in := map[string]bool{}
	add := func(name string) {
		if _, ok := s.Nodes[name]; ok {
			in[name] = true
		}
	}
	for _, d := range decisions {
		if !restsOnFreshState(s, d) {
			continue
		}
		add(d.Node)
		if d.Gated && len(d.PodsToRelease) == 0 && d.Condition.Reason != v2alpha1.ReasonRolloutComplete {
			continue // a record of the node's own convergence rests on its workload alone
		}
		for _, r := range s.requirements(d.Node, true) {
			add(r.node)
			for _, v := range r.via {
				add(v)
			}
		}
		for name := range d.ReleasedAfter {
			add(name)
		}
		if n := s.Nodes[d.Node]; n != nil && n.NodeKind() == v2alpha1.KindFrontend {
			add(defaults.NodeName(s.Tenant.ClusterName, defaults.Backend))
		}
	}
	out := make([]string, 0, len(in))
	for name := range in {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// restsOnFreshState reports whether decision d releases its node or pods,
// or records the node's rollout complete or converged: what PlanOnFreshest
// reads fresh for.
func restsOnFreshState(s *Snapshot, d Decision) bool {
	return Releasing(s, d) || len(d.PodsToRelease) > 0 || d.RecordConverged ||
		d.Condition.Reason == v2alpha1.ReasonRolloutComplete && d.Changed(s.Nodes[d.Node])
}

// Covers reports whether scope holds every node of need.
func Covers(scope, need []string) bool {
	for _, name := range need {
		if _, found := slices.BinarySearch(scope, name); !found {
			return false
		}
	}
	return true
}

// WithWorkloadOf returns a copy of s in which each node of scope has the
// pods and the StatefulSet records read of it: its pods, the pods its
// StatefulSets want beyond them, whether its StatefulSet records its
// rollout converged, its set revision and its templates — as read carries
// them (a snapshot whose reads cover scope). s itself is left as it is.
func (s *Snapshot) WithWorkloadOf(read *Snapshot, scope []string) *Snapshot {
	out := *s
	out.Pods = maps.Clone(s.Pods)
	out.MissingPods = maps.Clone(s.MissingPods)
	out.SetsConverged = maps.Clone(s.SetsConverged)
	out.SetRevisions = maps.Clone(s.SetRevisions)
	out.SetTemplates = maps.Clone(s.SetTemplates)
	for _, name := range scope {
		pods := read.Pods[name]
		if s.SharedNames[name] {
			pods = nil // read by the tenant's nodes alone, a shared name's pods looked the node's
		}
		out.Pods = setOrDelete(out.Pods, name, pods, len(pods) > 0)
		out.MissingPods = setOrDelete(out.MissingPods, name, read.MissingPods[name], read.MissingPods[name] > 0)
		out.SetsConverged = setOrDelete(out.SetsConverged, name, true, read.SetsConverged[name])
		rev, ok := read.SetRevisions[name]
		out.SetRevisions = setOrDelete(out.SetRevisions, name, rev, ok)
		out.SetTemplates = setOrDelete(out.SetTemplates, name, read.SetTemplates[name], len(read.SetTemplates[name]) > 0)
	}
	return &out
}

// setOrDelete sets m[k] to v when keep holds and deletes it otherwise,
// making m when it is nil and something is set.
func setOrDelete[V any](m map[string]V, k string, v V, keep bool) map[string]V {
	if !keep {
		delete(m, k)
		return m
	}
	if m == nil {
		m = map[string]V{}
	}
	m[k] = v
	return m
}
