package sequencer

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// This file reads a tenant fresh by name (DESIGN §4b: fresh means fresh
// state, not a LIST). A GET by name is answered from etcd at once, where a
// consistent LIST waits for the API server's watch cache to prove itself
// current (up to its 100 ms progress-request period). The cache supplies
// the names; every object a decision rests on is then read by name, and
// whatever the cache cannot name is either derived from what was read or
// makes the read fall back to the namespace LIST (freshReads):
//
//   - Nodes: the tenant's nodes the cache knows, then, from the specs just
//     read, every node their prerequisites can name — an explicit entry by
//     its name and kind, a defaulted list by every key that can come before
//     the node in its order (<cluster>-be, <cluster>-feN) — until nothing
//     new is named. A node the cache does not know that no node names is no
//     one's prerequisite: only its own decision could change, and it has
//     none in this pass.
//   - StatefulSets: the one named after each node (how the Express operator
//     names them) and every one the cache's pods of the node name as their
//     controller.
//   - Pods: every ordinal of those StatefulSets (max of spec and status
//     replicas, from spec.ordinals.start) and every pod of the node the
//     cache knows.
//
// A node the cache does not know that no node names is left out, and with
// it what it holds of others: the released-after records of its own
// release. Such a record is what says a prerequisite's rollout converged
// when nothing else does (its RolloutComplete condition overwritten since),
// and a node without one looks in flight — Ready for no one, its new pods
// free to start. A read by name in which any node is in flight is therefore
// not used: the namespace is listed, and every record is seen. The release
// of the next node in line, the hop that matters, comes when no node of the
// tenant is in flight (the node before it has just converged).
//
// It also falls back when a pod of a node is controlled by no StatefulSet (its
// siblings have no names to derive), when a StatefulSet a cached pod names
// is gone (its successor may have another name), when a released live node
// has no StatefulSet found (its convergence record and the pods its
// controller wants are unknown), or when the tenant needs more than
// maxNamedReads reads.

// GatherFreshFromCache reads cached's tenant fresh: by name where every name
// is known (GatherFreshByName), else by consistent LISTs of its namespace
// (GatherFresh). A nil cached snapshot (the cache could not be read) is
// listed.
func GatherFreshFromCache(ctx context.Context, r client.Reader, cached *rollout.Snapshot, t rollout.Tenant, orders defaults.Orders, now time.Time, deadline time.Duration, grouping rollout.Grouping) (*rollout.Snapshot, error) {
	if cached != nil {
		s, err := GatherFreshByName(ctx, r, cached, now)
		if err != nil || s != nil {
			if s != nil {
				freshReadsTotal.WithLabelValues("names").Inc()
			}
			return s, err
		}
	}
	freshReadsTotal.WithLabelValues("list").Inc()
	return GatherFresh(ctx, r, t, orders, now, deadline, grouping)
}

// maxNamedReads bounds the nodes one fresh read by name may ask for: a
// tenant that needs more is listed instead.
const maxNamedReads = 128

// nodeRef names a node by name and kind.
type nodeRef struct{ name, kind string }

// GatherFreshByName reads, straight from the API server and by name, the
// snapshot of cached's tenant: the same snapshot GatherFresh lists, for the
// objects the tenant's decisions can rest on. It returns nil when a name
// the read needs cannot be known (see above): the caller lists instead.
func GatherFreshByName(ctx context.Context, r client.Reader, cached *rollout.Snapshot, now time.Time) (*rollout.Snapshot, error) {
	t := cached.Tenant
	// What the cache names is read at once, in parallel: the nodes, the
	// StatefulSets named after them or by their pods, the pods.
	setNames, fromPods, ok := setNamesOf(cached)
	if !ok {
		return nil, nil
	}
	var podNames []string
	for _, pods := range cached.Pods {
		for _, p := range pods {
			if p.Name != "" && !slices.Contains(podNames, p.Name) {
				podNames = append(podNames, p.Name)
			}
		}
	}
	var nodes []v2alpha1.Node
	var sets []appsv1.StatefulSet
	var pods []corev1.Pod
	var g errgroup.Group
	g.Go(func() (err error) { nodes, err = nodesByName(ctx, r, cached); return err })
	g.Go(func() (err error) { sets, err = getAll(ctx, r, t.Namespace, setNames, newStatefulSet); return err })
	g.Go(func() (err error) { pods, err = getAll(ctx, r, t.Namespace, podNames, newPod); return err })
	if err := g.Wait(); err != nil || nodes == nil || sets == nil || pods == nil {
		return nil, err
	}
	mine := map[string]bool{}
	for _, n := range nodes {
		if n.NodeSpec().ClusterConfig.ClusterName == t.ClusterName {
			mine[n.GetName()] = true
		}
	}
	// Then what those name: the StatefulSets of nodes the cache did not
	// know, and every pod the StatefulSets want that was not read yet.
	var more []string
	for name := range mine {
		if !slices.Contains(setNames, name) {
			more = append(more, name)
		}
	}
	moreSets, err := getAll(ctx, r, t.Namespace, more, newStatefulSet)
	if err != nil || moreSets == nil {
		return nil, err
	}
	sets = append(sets, moreSets...)
	found := map[string]bool{}
	for _, sts := range sets {
		found[sts.Name] = true
	}
	for _, name := range fromPods {
		if !found[name] {
			return nil, nil // a StatefulSet the cache's pods name is gone
		}
	}
	wanted, ok := podNamesOf(nodes, mine, sets)
	if !ok {
		return nil, nil
	}
	wanted = slices.DeleteFunc(wanted, func(name string) bool { return slices.Contains(podNames, name) })
	morePods, err := getAll(ctx, r, t.Namespace, wanted, newPod)
	if err != nil || morePods == nil {
		return nil, err
	}
	pods = append(pods, morePods...)
	for i := range pods {
		if mine[pods[i].Labels[v2alpha1.LabelNode]] && !found[rollout.StatefulSetOf(&pods[i])] {
			return nil, nil // a pod of a controller whose pods have no names to derive
		}
	}
	lost, err := lostMachines(ctx, r, pods)
	if err != nil {
		return nil, err
	}
	s := rollout.SnapshotOf(rollout.Objects{Nodes: nodes, Pods: pods, StatefulSets: sets, LostMachines: lost}, t, cached.Orders, now)
	if s.AnyInFlight() {
		return nil, nil // it may be in flight only for want of a record a node no name reaches holds
	}
	s.ProgressDeadline, s.Grouping = cached.ProgressDeadline, cached.Grouping
	return s, nil
}

func newStatefulSet() *appsv1.StatefulSet { return &appsv1.StatefulSet{} }

func newPod() *corev1.Pod { return &corev1.Pod{} }

// nodesByName reads the tenant's nodes the cache knows and, from their
// specs, every node their prerequisites can name, until nothing new is
// named; Backends first, as GatherFresh lists them. It returns nil when the
// tenant needs more than maxNamedReads.
func nodesByName(ctx context.Context, r client.Reader, cached *rollout.Snapshot) ([]v2alpha1.Node, error) {
	t := cached.Tenant
	asked := map[nodeRef]bool{}
	var pending []nodeRef
	ask := func(ref nodeRef) {
		if ref.name != "" && !asked[ref] {
			asked[ref] = true
			pending = append(pending, ref)
		}
	}
	ask(nodeRef{defaults.NodeName(t.ClusterName, defaults.Backend), v2alpha1.KindBackend})
	for name, n := range cached.Nodes {
		ask(nodeRef{name, n.NodeKind()})
	}
	var out []v2alpha1.Node
	for len(pending) > 0 {
		if len(asked) > maxNamedReads {
			return nil, nil
		}
		batch := pending
		pending = nil
		got, err := getNodes(ctx, r, t.Namespace, batch)
		if err != nil {
			return nil, err
		}
		for _, n := range got {
			out = append(out, n)
			if n.NodeSpec().ClusterConfig.ClusterName == t.ClusterName {
				for _, ref := range namedBy(n, cached.Orders) {
					ask(ref)
				}
			}
		}
	}
	slices.SortStableFunc(out, func(a, b v2alpha1.Node) int {
		return boolOrder(a.NodeKind() != v2alpha1.KindBackend) - boolOrder(b.NodeKind() != v2alpha1.KindBackend)
	})
	return out, nil
}

func boolOrder(b bool) int {
	if b {
		return 1
	}
	return 0
}

// namedBy returns every node a node's prerequisite lists can name: an
// explicit entry by its name and kind, a defaulted list by every key that
// can come before the node in its order, in a tenant of any size (the
// reduced list keeps those that are live).
func namedBy(n v2alpha1.Node, orders defaults.Orders) []nodeRef {
	var refs []nodeRef
	cluster := n.NodeSpec().ClusterConfig.ClusterName
	for _, l := range defaults.Lists {
		if !defaults.IsDefaulted(n, l) {
			for _, p := range l.Get(n.NodeSpec()) {
				refs = append(refs, nodeRef{p.ExpressNode, p.Kind})
			}
			continue
		}
		if k, ok := defaults.KeyOf(n); ok {
			for _, prev := range keysBefore(l.Order(orders), k) {
				refs = append(refs, nodeRef{defaults.NodeName(cluster, prev), prev.Kind()})
			}
		}
	}
	return refs
}

// keysBefore returns every key that can come before k in order o, whatever
// the tenant's size: the head's keys before it, or, for a frontend beyond
// the head, the whole head and every frontend of a lower number.
func keysBefore(o defaults.Order, k defaults.Key) []defaults.Key {
	if i := slices.Index(o, k); i >= 0 {
		return slices.Clone(o[:i])
	}
	out := slices.Clone([]defaults.Key(o))
	if k.IsBackend() {
		return out
	}
	for n := 1; n < k.Frontend; n++ {
		if !slices.Contains(o, defaults.FrontendKey(n)) {
			out = append(out, defaults.FrontendKey(n))
		}
	}
	return out
}

// getNodes reads nodes by name and kind in parallel; those that do not
// exist are left out.
func getNodes(ctx context.Context, r client.Reader, namespace string, refs []nodeRef) ([]v2alpha1.Node, error) {
	got := make([]v2alpha1.Node, len(refs))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelReads)
	for i, ref := range refs {
		var n v2alpha1.Node
		switch ref.kind {
		case v2alpha1.KindBackend:
			n = &v2alpha1.Backend{}
		case v2alpha1.KindFrontend:
			n = &v2alpha1.Frontend{}
		default:
			continue
		}
		g.Go(func() error {
			err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.name}, n)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				return fmt.Errorf("reading %s %s/%s: %w", ref.kind, namespace, ref.name, err)
			default:
				got[i] = n
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return slices.DeleteFunc(got, func(n v2alpha1.Node) bool { return n == nil }), nil
}

// parallelReads bounds the GETs one fresh read has in flight.
const parallelReads = 16

// setNamesOf returns the StatefulSets to read first: the one named after
// each node the cache knows, and those the cache's pods of its nodes name
// as their controller (also returned alone). It returns false when a cached
// pod has no StatefulSet controller.
func setNamesOf(cached *rollout.Snapshot) (all, fromPods []string, ok bool) {
	for name := range cached.Nodes {
		all = append(all, name)
		for _, p := range cached.Pods[name] {
			if p.Set == "" {
				return nil, nil, false
			}
			if !slices.Contains(fromPods, p.Set) {
				fromPods = append(fromPods, p.Set)
			}
		}
	}
	for _, name := range fromPods {
		if !slices.Contains(all, name) {
			all = append(all, name)
		}
	}
	return all, fromPods, true
}

// podNamesOf returns every ordinal of the StatefulSets whose template names
// a node of the tenant. It returns false when a released live node has no
// StatefulSet: what its controller wants, and the record that its rollout
// converged, are not known by name.
func podNamesOf(nodes []v2alpha1.Node, mine map[string]bool, sets []appsv1.StatefulSet) ([]string, bool) {
	var names []string
	add := func(name string) {
		if name != "" && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	withSet := map[string]bool{}
	for _, sts := range sets {
		node := sts.Spec.Template.Labels[v2alpha1.LabelNode]
		if !mine[node] {
			continue
		}
		withSet[node] = true
		start := int32(0)
		if sts.Spec.Ordinals != nil {
			start = sts.Spec.Ordinals.Start
		}
		for i := range max(ptr.Deref(sts.Spec.Replicas, 1), sts.Status.Replicas) {
			add(sts.Name + "-" + strconv.Itoa(int(start+i)))
		}
	}
	for _, n := range nodes {
		if mine[n.GetName()] && rollout.Live(n) && rollout.ReleasedTarget(n) != "" && !withSet[n.GetName()] {
			return nil, false
		}
	}
	return names, true
}

// getAll reads objects of one kind by name in parallel; those that do not
// exist are left out. It returns nil when the sequencer may not read them.
func getAll[T any, PT interface {
	*T
	client.Object
}](ctx context.Context, r client.Reader, namespace string, names []string, newObj func() PT) ([]T, error) {
	got := make([]PT, len(names))
	var forbidden atomic.Bool
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelReads)
	for i, name := range names {
		g.Go(func() error {
			obj := newObj()
			err := r.Get(gctx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
			switch {
			case apierrors.IsNotFound(err):
			case apierrors.IsForbidden(err):
				forbidden.Store(true)
			case err != nil:
				return fmt.Errorf("reading %T %s/%s: %w", obj, namespace, name, err)
			default:
				got[i] = obj
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if forbidden.Load() {
		return nil, nil
	}
	out := make([]T, 0, len(got))
	for _, obj := range got {
		if obj != nil {
			out = append(out, *obj)
		}
	}
	return out, nil
}
