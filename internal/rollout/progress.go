package rollout

import (
	"maps"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// TenantState is where a tenant's rollout stands, as the fleet view shows it.
type TenantState string

// The states, in the order the fleet view lists them: what needs a human
// first.
const (
	// Stuck: a node cannot go on by itself (a cycle, a prerequisite that
	// does not exist, a rollout past its progress deadline).
	Stuck TenantState = "stuck"
	// Held: a node waits and nothing rolls that it waits for (paused,
	// settling, a change landing, a predecessor not Ready).
	Held TenantState = "held"
	// Rolling: a released rollout or a recovery is under way.
	Rolling TenantState = "rolling"
	// Done: every live node is released and Ready on its target.
	Done TenantState = "done"
)

// stuckReasons are the reasons of a node that does not go on by itself:
// its Events are Warnings, and the fleet view calls its tenant stuck.
var stuckReasons = []string{v2alpha1.ReasonDependencyCycle, v2alpha1.ReasonPrerequisiteNotFound, v2alpha1.ReasonPrerequisitePinUnreachable, v2alpha1.ReasonProgressDeadlineExceeded, v2alpha1.ReasonNameShared}

// StuckReasons returns the reasons of a node that does not go on by
// itself, for the alerts, the dashboard and Argo CD's health check to name.
func StuckReasons() []string { return slices.Clone(stuckReasons) }

// IsStuckReason reports whether a node with this reason cannot go on by
// itself.
func IsStuckReason(reason string) bool { return slices.Contains(stuckReasons, reason) }

// rollingReasons are the reasons of a node whose rollout or recovery is
// under way.
var rollingReasons = []string{v2alpha1.ReasonReleased, v2alpha1.ReasonPrerequisitesIgnored, v2alpha1.ReasonRecovering}

// Progress is one tenant's rollout at a glance.
type Progress struct {
	State TenantState
	// Live are the tenant's live nodes; OnTarget those of them released
	// and Ready on their target.
	Live, OnTarget int
	// Rolling are the nodes whose rollout or recovery is under way.
	Rolling []string
	// NotRendered are the tenant's nodes the newest render of its chart
	// does not list (AnnotationRenderedNodes): no part of its changes,
	// they hold none of them.
	NotRendered []string
	// Next is the node the fleet view names: the stuck one, or the first
	// in the upgrade order that waits (gated, or released with its pods
	// held); nil when none waits.
	Next *Decision
	// Since is when the named node took its reason — for a rolling or done
	// tenant, the latest of its rolling or live nodes — as the stored
	// conditions say. Zero when none says: a reason the sequencer has not
	// written yet.
	Since time.Time
}

// settledReasons are the reasons of a live node whose rollout is done.
var settledReasons = []string{v2alpha1.ReasonRolloutComplete, v2alpha1.ReasonNodeDown}

// ProgressOf sums up a tenant from its plan (Plan(s)). A node waits when it
// is gated, or released with pods still held (RolloutPodsHeld, a recovery
// waiting for a predecessor); the tenant is done only when every live node
// is released and Ready on its target.
func ProgressOf(s *Snapshot, decisions []Decision) Progress {
	var p Progress
	byNode := map[string]Decision{}
	for _, d := range decisions {
		byNode[d.Node] = d
	}
	var live []string
	for name, n := range s.Nodes {
		if Live(n) {
			live = append(live, name)
		}
	}
	live = s.inUpgradeOrder(live)
	p.Live = len(live)
	newest, _ := s.newestRolloutID()
	if _, off := s.renderedBy(newest); len(off) > 0 {
		p.NotRendered = slices.Sorted(maps.Keys(off))
	}
	var stuck, waiting *Decision
	for _, name := range live {
		d := byNode[name]
		switch reason := d.Condition.Reason; {
		case slices.Contains(stuckReasons, reason):
			if stuck == nil {
				stuck = &d
			}
		case slices.Contains(rollingReasons, reason) && !d.Gated:
			p.Rolling = append(p.Rolling, name)
		case d.Gated || !slices.Contains(settledReasons, reason):
			if waiting == nil {
				waiting = &d
			}
		}
		if !d.Gated && s.onTarget(name) && s.isReady(name) {
			p.OnTarget++
		}
	}
	switch {
	case stuck != nil:
		p.State, p.Next = Stuck, stuck
		p.Since = s.since(*stuck)
	case len(p.Rolling) > 0:
		p.State, p.Next = Rolling, waiting
		for _, name := range p.Rolling {
			if t := s.since(byNode[name]); t.After(p.Since) {
				p.Since = t
			}
		}
	case waiting != nil:
		p.State, p.Next = Held, waiting
		p.Since = s.since(*waiting)
	case p.OnTarget < p.Live:
		// Nothing holds or rolls them, yet not every node is Ready on its
		// target: pods Kubernetes is bringing back by itself.
		p.State = Rolling
	default:
		p.State = Done
		for _, name := range live {
			if t := s.since(byNode[name]); t.After(p.Since) {
				p.Since = t
			}
		}
	}
	return p
}

// since is when node d.Node took the reason of its decision d, as its
// stored PrerequisitesReady condition says (its last change of status or
// reason); zero when the stored condition has another reason — the
// sequencer has not written this decision yet — or there is none.
func (s *Snapshot) since(d Decision) time.Time {
	c := meta.FindStatusCondition(s.Nodes[d.Node].NodeStatus().Conditions, v2alpha1.ConditionPrerequisitesReady)
	if c == nil || c.Reason != d.Condition.Reason {
		return time.Time{}
	}
	return c.LastTransitionTime.Time
}

// inUpgradeOrder returns names in the tenant's upgrade order: keyed nodes
// in order, then the rest by name.
func (s *Snapshot) inUpgradeOrder(names []string) []string {
	byKey := map[defaults.Key]string{}
	var keys []defaults.Key
	var rest []string
	for _, name := range names {
		if k, ok := defaults.KeyOf(s.Nodes[name]); ok {
			byKey[k] = name
			keys = append(keys, k)
		} else {
			rest = append(rest, name)
		}
	}
	out := make([]string, 0, len(names))
	for _, k := range s.Orders.Upgrade.Sequence(keys) {
		out = append(out, byKey[k])
	}
	slices.Sort(rest)
	return append(out, rest...)
}

// TenantProgress is one tenant of a fleet and its progress.
type TenantProgress struct {
	Tenant Tenant
	// Nodes are the tenant's nodes, for a caller that filters by label.
	Nodes []v2alpha1.Node
	Progress
}

// FleetOf sums up every tenant of read — one namespace's objects or many
// namespaces' — with Plan, at now, with the sequencer's progress deadline
// and change grouping. Tenants come sorted by namespace and name.
func FleetOf(read Objects, orders defaults.Orders, now time.Time, deadline time.Duration, grouping Grouping) []TenantProgress {
	byNamespace := map[string]*Objects{}
	var namespaces []string
	for _, n := range read.Nodes {
		o, ok := byNamespace[n.GetNamespace()]
		if !ok {
			o = &Objects{LostMachines: read.LostMachines, StatefulSetsUnread: read.StatefulSetsUnread}
			byNamespace[n.GetNamespace()] = o
			namespaces = append(namespaces, n.GetNamespace())
		}
		o.Nodes = append(o.Nodes, n)
	}
	for _, p := range read.Pods {
		if o, ok := byNamespace[p.Namespace]; ok {
			o.Pods = append(o.Pods, p)
		}
	}
	for _, set := range read.StatefulSets {
		if o, ok := byNamespace[set.Namespace]; ok {
			o.StatefulSets = append(o.StatefulSets, set)
		}
	}
	slices.Sort(namespaces)
	var out []TenantProgress
	var objects []*Objects
	for _, namespace := range namespaces {
		o := byNamespace[namespace]
		nodes := map[string][]v2alpha1.Node{}
		var clusters []string
		for _, n := range o.Nodes {
			cluster := n.NodeSpec().ClusterConfig.ClusterName
			if _, ok := nodes[cluster]; !ok {
				clusters = append(clusters, cluster)
			}
			nodes[cluster] = append(nodes[cluster], n)
		}
		slices.Sort(clusters)
		for _, cluster := range clusters {
			out = append(out, TenantProgress{Tenant: Tenant{Namespace: namespace, ClusterName: cluster}, Nodes: nodes[cluster]})
			objects = append(objects, o)
		}
	}
	// Tenants are planned apart from each other, on every core: each
	// reads only its own namespace's objects and writes only its own entry.
	// A panic in one is raised again in the caller's goroutine, where it
	// can be recovered.
	var next atomic.Int64
	var wg sync.WaitGroup
	var panicked atomic.Pointer[any]
	for range min(runtime.GOMAXPROCS(0), len(out)) {
		wg.Go(func() {
			defer func() {
				if v := recover(); v != nil {
					panicked.CompareAndSwap(nil, &v)
				}
			}()
			for i := int(next.Add(1)) - 1; i < len(out); i = int(next.Add(1)) - 1 {
				s := SnapshotOf(*objects[i], out[i].Tenant, orders, now)
				s.ProgressDeadline, s.Grouping = deadline, grouping
				out[i].Progress = ProgressOf(s, Plan(s))
			}
		})
	}
	wg.Wait()
	if v := panicked.Load(); v != nil {
		panic(*v)
	}
	return out
}
