package sequencer

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// This file reads a tenant's nodes fresh by name (DESIGN §4b: fresh means
// fresh state, not a LIST). A GET by name is answered from etcd at once,
// where a consistent LIST waits for the API server's watch cache to prove
// itself current (up to its 100 ms progress-request period) — longest for
// kinds that change least, as Backends and Frontends do. Pods and
// StatefulSets are still listed: their names cannot be known in general (a
// pod of no StatefulSet, a StatefulSet named otherwise), and their watch
// caches, busy with every pod and StatefulSet of the cluster, catch up
// sooner. The cache names the nodes; each is read by GET:
//
//   - the tenant's nodes the cache knows, then, from the specs just read,
//     every node their prerequisites can name — an explicit entry by its
//     name and kind, a defaulted list by every key that can come before the
//     node in its order (<cluster>-be, <cluster>-feN) — until nothing new
//     is named. A node the cache does not know that no node names is no
//     one's prerequisite: only its own decision could change, and it has
//     none in this pass.
//
// Such a node is left out, and with it what it holds of others: the
// released-after records of its own release. Such a record is what says a
// prerequisite's rollout converged when nothing else does (its
// RolloutComplete condition overwritten since), and a node without one
// looks in flight — Ready for no one, its new pods free to start. A read by
// name in which any node is in flight is therefore not used: the nodes are
// listed too, and every record is seen. The release of the next node in
// line, the hop that matters, comes when no node of the tenant is in flight
// (the node before it has just converged). So are tenants that need more
// than maxNamedReads nodes read.

// GatherFreshFromCache reads cached's tenant fresh: its nodes by name where
// that is enough (GatherFreshByName), else by consistent LISTs of its
// namespace (GatherFresh). A nil cached snapshot (the cache could not be
// read) is listed.
func GatherFreshFromCache(ctx context.Context, r client.Reader, cached *rollout.Snapshot, t rollout.Tenant, orders defaults.Orders, now time.Time, deadline time.Duration, grouping rollout.Grouping) (*rollout.Snapshot, error) {
	if cached == nil {
		freshReadsTotal.WithLabelValues("list").Inc()
		return GatherFresh(ctx, r, t, orders, now, deadline, grouping)
	}
	return GatherFreshByName(ctx, r, cached, now)
}

// GatherFreshByName reads cached's tenant straight from the API server:
// the nodes by name, from what the cache names (see above), the Express
// pods and StatefulSets of the namespace by consistent LISTs, at the same
// time. Where the nodes read by name are not enough — a node in flight, a
// tenant too large — the namespace's nodes are listed as well.
func GatherFreshByName(ctx context.Context, r client.Reader, cached *rollout.Snapshot, now time.Time) (*rollout.Snapshot, error) {
	t := cached.Tenant
	read, err := freshReadsWith(ctx, r, t.Namespace, func(ctx context.Context) ([]v2alpha1.Node, error) {
		return nodesByName(ctx, r, cached)
	})
	if err != nil {
		return nil, err
	}
	how := "names"
	s := rollout.SnapshotOf(read, t, cached.Orders, now)
	if read.Nodes == nil || s.AnyInFlight() {
		how = "list"
		if read.Nodes, err = NamespaceNodes(ctx, r, t.Namespace); err != nil {
			return nil, err
		}
		s = rollout.SnapshotOf(read, t, cached.Orders, now)
	}
	freshReadsTotal.WithLabelValues(how).Inc()
	s.ProgressDeadline, s.Grouping = cached.ProgressDeadline, cached.Grouping
	return s, nil
}

// maxNamedReads bounds the nodes one fresh read by name may ask for: a
// tenant that needs more is listed instead.
const maxNamedReads = 128

// nodeRef names a node by name and kind.
type nodeRef struct{ name, kind string }

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
