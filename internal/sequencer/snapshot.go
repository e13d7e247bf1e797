package sequencer

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// Index names of the cache's field indexes.
const (
	// IndexTenant indexes Backends and Frontends by spec.clusterConfig.clusterName.
	IndexTenant = "spec.clusterConfig.clusterName"
	// IndexPodNode indexes pods by their express.medallia.com/node label.
	IndexPodNode = "metadata.labels.express.medallia.com/node"
)

// Gather reads a tenant's snapshot from the cache through the field indexes.
func Gather(ctx context.Context, r client.Reader, tenant rollout.Tenant, orders defaults.Orders, now time.Time, deadline time.Duration, grouping rollout.Grouping) (*rollout.Snapshot, error) {
	nodes, err := tenantNodes(ctx, r, tenant)
	if err != nil {
		return nil, err
	}
	shared, err := sharedNames(ctx, r, tenant, nodes)
	if err != nil {
		return nil, err
	}
	s := &rollout.Snapshot{
		Tenant: tenant, Orders: orders, Now: now, ProgressDeadline: deadline, Grouping: grouping,
		Nodes: nodes, Pods: map[string][]rollout.Pod{}, SharedNames: shared,
	}
	for name := range s.Nodes {
		if shared[name] {
			continue // none of its pods counts (rollout.Snapshot.SharedNames)
		}
		var pods corev1.PodList
		if err := r.List(ctx, &pods, client.InNamespace(tenant.Namespace), client.MatchingFields{IndexPodNode: name}); err != nil {
			return nil, fmt.Errorf("listing pods of %s/%s: %w", tenant.Namespace, name, err)
		}
		for i := range pods.Items {
			s.Pods[name] = append(s.Pods[name], rollout.PodOf(&pods.Items[i]))
		}
	}
	// The cache holds no StatefulSets: pods are judged by their own owner
	// references and creation time.
	s.Pods = rollout.CurrentPods(s.Pods, s.Nodes, nil)
	return s, nil
}

// tenantNodes lists tenant's Backends and Frontends from r, a cache with
// the IndexTenant index, by name: a Frontend wins over a Backend of the same
// name.
func tenantNodes(ctx context.Context, r client.Reader, tenant rollout.Tenant) (map[string]v2alpha1.Node, error) {
	inTenant := []client.ListOption{client.InNamespace(tenant.Namespace), client.MatchingFields{IndexTenant: tenant.ClusterName}}
	var bes v2alpha1.BackendList
	if err := r.List(ctx, &bes, inTenant...); err != nil {
		return nil, fmt.Errorf("listing Backends of tenant %s: %w", tenant, err)
	}
	var fes v2alpha1.FrontendList
	if err := r.List(ctx, &fes, inTenant...); err != nil {
		return nil, fmt.Errorf("listing Frontends of tenant %s: %w", tenant, err)
	}
	nodes := make(map[string]v2alpha1.Node, len(bes.Items)+len(fes.Items))
	for i := range bes.Items {
		nodes[bes.Items[i].Name] = &bes.Items[i]
	}
	for i := range fes.Items {
		nodes[fes.Items[i].Name] = &fes.Items[i]
	}
	return nodes, nil
}

// sharedNames returns, of the tenant's nodes (by name, as tenantNodes
// keeps them: a Frontend over a Backend of its name), the names a Backend
// and a Frontend of the namespace share, read from r (the cache), in the
// tenant or across two: what SnapshotOf finds on a fresh read of the
// namespace, so that the cache's plan holds what the fresh one does and
// says why.
func sharedNames(ctx context.Context, r client.Reader, tenant rollout.Tenant, nodes map[string]v2alpha1.Node) (map[string]bool, error) {
	var out map[string]bool
	for name, n := range nodes {
		other := v2alpha1.NewNode(v2alpha1.OtherKind(n.NodeKind()))
		err := r.Get(ctx, client.ObjectKey{Namespace: tenant.Namespace, Name: name}, other)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("reading whether another kind of node is called %s/%s: %w", tenant.Namespace, name, err)
		}
		if out == nil {
			out = map[string]bool{}
		}
		out[name] = true
	}
	return out, nil
}

// NamespaceNodes lists every Backend and Frontend of a namespace, whatever
// their tenant: the validating webhook needs the other tenants' nodes too, to
// recognise a prerequisite that names one.
func NamespaceNodes(ctx context.Context, r client.Reader, namespace string) ([]v2alpha1.Node, error) {
	var bes v2alpha1.BackendList
	if err := r.List(ctx, &bes, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing Backends in %s: %w", namespace, err)
	}
	var fes v2alpha1.FrontendList
	if err := r.List(ctx, &fes, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("listing Frontends in %s: %w", namespace, err)
	}
	return nodesOf(bes.Items, fes.Items), nil
}

// nodesOf returns Backends and Frontends as nodes.
func nodesOf(bes []v2alpha1.Backend, fes []v2alpha1.Frontend) []v2alpha1.Node {
	nodes := make([]v2alpha1.Node, 0, len(bes)+len(fes))
	for i := range bes {
		nodes = append(nodes, &bes[i])
	}
	for i := range fes {
		nodes = append(nodes, &fes[i])
	}
	return nodes
}

// GatherFresh reads a tenant's snapshot straight from the API server (r is
// not a cache): where the overlay of the sequencer's own writes cannot be
// used, releases are decided on what the API server holds now.
//
// Every kind is listed, Backends too, though a Backend could be read by
// name at once where a consistent list waits for the API server's watch
// cache: a Backend left out of the snapshot can be what holds a node back —
// its released-after record of a rollout that converged keeps a recovering
// node out of the in-flight shortcut that lets its pods start — and no
// cache knows, whatever it has seen, every Backend that exists now (a new
// leader's cache lags, a Backend is deleted and created again, its tenant
// changes and changes back).
func GatherFresh(ctx context.Context, r client.Reader, tenant rollout.Tenant, orders defaults.Orders, now time.Time, deadline time.Duration, grouping rollout.Grouping) (*rollout.Snapshot, error) {
	read, err := freshReads(ctx, r, tenant.Namespace)
	if err != nil {
		return nil, err
	}
	s := rollout.SnapshotOf(read, tenant, orders, now)
	s.ProgressDeadline, s.Grouping = deadline, grouping
	return s, nil
}

// GatherFreshFor reads, straight from the API server, the snapshot of the
// tenant of the node called name, of kind (either kind when empty: a pod
// names its node by name alone): what the pod admission webhook and the
// release guard decide on, with the sequencer's change grouping. It
// returns nil when no such node exists. Where a Backend and a Frontend
// share the name, a node of either kind is taken, and the snapshot says
// the name is shared (Snapshot.SharedNames): none of its pods is let go.
func GatherFreshFor(ctx context.Context, r client.Reader, namespace, name, kind string, orders defaults.Orders, now time.Time, grouping rollout.Grouping) (*rollout.Snapshot, error) {
	read, err := freshReads(ctx, r, namespace)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(read.Nodes, func(n v2alpha1.Node) bool {
		return n.GetName() == name && (kind == "" || n.NodeKind() == kind)
	})
	if i < 0 {
		return nil, nil
	}
	s := rollout.SnapshotOf(read, rollout.Tenant{Namespace: namespace, ClusterName: read.Nodes[i].NodeSpec().ClusterConfig.ClusterName}, orders, now)
	s.Grouping = grouping
	return s, nil
}

// ModeAndTenant is what an admission that judges a node reads fresh: the
// namespace's sequencing mode and the node's tenant (GatherFreshFor), each
// with the error its read met.
type ModeAndTenant struct {
	Mode      string
	ModeErr   error
	Tenant    *rollout.Snapshot
	TenantErr error
}

// Audit reports whether the namespace was read in audit.
func (m ModeAndTenant) Audit() bool { return m.ModeErr == nil && m.Mode == v2alpha1.ModeAudit }

// ReadModeAndTenant reads namespace's mode (ReadMode, def for a namespace
// without the label) and the tenant of node name of kind (GatherFreshFor) at the
// same time: an admission's wait is one round trip of reads, not two.
// Unless the tenant is wanted in audit too (inAudit), its read is cut short
// once the mode is read audit, and its error is then that.
func ReadModeAndTenant(ctx context.Context, r client.Reader, namespace, name, kind, def string, inAudit bool, orders defaults.Orders, now time.Time, grouping rollout.Grouping) ModeAndTenant {
	var out ModeAndTenant
	tenantCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		out.Mode, out.ModeErr = ReadMode(ctx, r, namespace, def)
		if !inAudit && out.Audit() {
			cancel()
		}
	})
	out.Tenant, out.TenantErr = GatherFreshFor(tenantCtx, r, namespace, name, kind, orders, now, grouping)
	wg.Wait()
	return out
}

// ReadNamespace reads what the sequencer plans on in a namespace — in every
// namespace when it is empty — with one LIST per kind from r: the fleet
// view's read, straight from the API server (or, for status -w, from its
// informers).
func ReadNamespace(ctx context.Context, r client.Reader, namespace string) (rollout.Objects, error) {
	return freshReads(ctx, r, namespace)
}

// freshReads lists, at the same time, the namespace's Backends, Frontends,
// Express pods (labelled express.medallia.com/node) and StatefulSets: one
// round trip's latency instead of four, and a second where their revisions
// differ, answered from the watch cache's snapshots (kube-apiserver 1.34
// and later; from etcd before). Each list is as
// fresh as the API server at its moment, and the four are made one moment
// (atOneRevision):
// a Frontend brought back up after its list, and a Backend's pod turning
// Ready before the pods' list, are otherwise read as a Frontend down and a
// Backend Ready, which they never were at once. StatefulSets the sequencer
// may not list (an installation whose RBAC predates the read) are logged
// once and left out: pods are then taken as they are, however many their
// StatefulSet wants.
func freshReads(ctx context.Context, r client.Reader, namespace string) (rollout.Objects, error) {
	where := namespace
	if namespace == "" {
		where = "all namespaces"
	}
	var bes v2alpha1.BackendList
	var fes v2alpha1.FrontendList
	var pods corev1.PodList
	var sets appsv1.StatefulSetList
	setsListed := true
	var g errgroup.Group
	g.Go(func() error {
		if err := r.List(ctx, &bes, client.InNamespace(namespace)); err != nil {
			return fmt.Errorf("listing Backends in %s: %w", where, err)
		}
		return nil
	})
	g.Go(func() error {
		if err := r.List(ctx, &fes, client.InNamespace(namespace)); err != nil {
			return fmt.Errorf("listing Frontends in %s: %w", where, err)
		}
		return nil
	})
	g.Go(func() error {
		if err := r.List(ctx, &pods, client.InNamespace(namespace), client.HasLabels{v2alpha1.LabelNode}); err != nil {
			return fmt.Errorf("listing the Express pods of %s: %w", where, err)
		}
		return nil
	})
	g.Go(func() error {
		err := r.List(ctx, &sets, client.InNamespace(namespace))
		if apierrors.IsForbidden(err) {
			setsListed = false
			partialReads.WithLabelValues("statefulsets").Inc()
			statefulSetsForbidden.Do(func() {
				log.FromContext(ctx).Error(err, "Taking Express pods as they are, however many their StatefulSet wants: the sequencer may not list StatefulSets (RBAC list on statefulsets in group apps)")
			})
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing the StatefulSets of %s: %w", where, err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return rollout.Objects{}, err
	}
	lists := []listed{
		{&bes, []client.ListOption{client.InNamespace(namespace)}, "Backends"},
		{&fes, []client.ListOption{client.InNamespace(namespace)}, "Frontends"},
		{&pods, []client.ListOption{client.InNamespace(namespace), client.HasLabels{v2alpha1.LabelNode}}, "the Express pods"},
	}
	if setsListed {
		lists = append(lists, listed{&sets, []client.ListOption{client.InNamespace(namespace)}, "the StatefulSets"})
	}
	at, err := atOneRevision(ctx, r, where, lists)
	if err != nil {
		return rollout.Objects{}, err
	}
	lost, err := lostMachines(ctx, r, pods.Items, namespace == "", at)
	if err != nil {
		return rollout.Objects{}, err
	}
	return rollout.Objects{Nodes: nodesOf(bes.Items, fes.Items), Pods: pods.Items, StatefulSets: sets.Items, StatefulSetsUnread: !setsListed, LostMachines: lost}, nil
}

// statefulSetsForbidden logs once per process that StatefulSets may not be
// listed: every release and every pod admission would log it again.
var statefulSetsForbidden sync.Once
