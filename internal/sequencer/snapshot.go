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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// Tenant identifies a tenant: its namespace and clusterConfig.clusterName.
type Tenant struct {
	Namespace   string
	ClusterName string
}

// String renders the tenant as namespace/clusterName.
func (t Tenant) String() string { return t.Namespace + "/" + t.ClusterName }

// Pod is what the sequencer needs of one pod of a node.
type Pod struct {
	// Name of the pod.
	Name string
	// Conditions maps each pod condition type to its status.
	Conditions map[string]string
	// Version and Revision are the pod's express-version and
	// deployment-revision labels.
	Version, Revision string
	// Hash is the pod's target-hash label: the target it was created for.
	Hash string
	// Gates are the pod's scheduling gates; the pod is not scheduled while
	// any is present.
	Gates []string
	// Failing: the pod will not become Ready by itself — it failed, or a
	// container is crash-looping or cannot start (FailingPod). A pod that
	// is not Ready without failing (starting, a readiness blip, restarted
	// in place once) is expected to become Ready by itself.
	Failing bool
	// Set is the name of the StatefulSet that controls the pod (its
	// controller owner reference), empty for a pod of any other controller
	// or of none: the fresh read by name finds a node's pods through it.
	Set string
}

// failingWaits are the reasons a container waits that it does not leave by
// itself: the kubelet backs off a crash loop or an image it cannot pull, and
// a container that cannot be created stays so until its spec changes.
var failingWaits = []string{
	"CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "ErrImageNeverPull", "InvalidImageName",
	"CreateContainerConfigError", "CreateContainerError", "RunContainerError",
}

// FailingPod reports whether a pod will not become Ready by itself: it
// failed (phase Failed), or one of its containers, init containers
// included, waits for a reason it does not leave by itself.
func FailingPod(p *corev1.Pod) bool {
	if p.Status.Phase == corev1.PodFailed {
		return true
	}
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, c := range statuses {
			if w := c.State.Waiting; w != nil && slices.Contains(failingWaits, w.Reason) {
				return true
			}
		}
	}
	return false
}

// statefulSetOf returns the name of the StatefulSet that controls a pod,
// empty when its controller is anything else or there is none.
func statefulSetOf(p *corev1.Pod) string {
	if ref := metav1.GetControllerOf(p); ref != nil && ref.APIVersion == appsv1.SchemeGroupVersion.String() && ref.Kind == "StatefulSet" {
		return ref.Name
	}
	return ""
}

// HeldBySequencer reports whether the pod carries the sequencer's
// scheduling gate.
func (p Pod) HeldBySequencer() bool { return slices.Contains(p.Gates, v2alpha1.GateSequencer) }

// PodOf reads a pod into a Pod. A pod that is being deleted counts as not
// Ready, whatever its conditions still say.
func PodOf(p *corev1.Pod) Pod {
	out := Pod{
		Name:       p.Name,
		Conditions: make(map[string]string, len(p.Status.Conditions)),
		Version:    p.Labels[v2alpha1.LabelExpressVersion],
		Revision:   p.Labels[v2alpha1.LabelDeploymentRevision],
		Hash:       p.Labels[v2alpha1.LabelTargetHash],
		Failing:    FailingPod(p),
		Set:        statefulSetOf(p),
	}
	for _, g := range p.Spec.SchedulingGates {
		out.Gates = append(out.Gates, g.Name)
	}
	for _, c := range p.Status.Conditions {
		out.Conditions[string(c.Type)] = string(c.Status)
	}
	if p.DeletionTimestamp != nil {
		out.Conditions[string(corev1.PodReady)] = string(corev1.ConditionFalse)
	}
	return out
}

// Snapshot is everything Plan decides on: one tenant's nodes and their pods
// at one moment, the installation's default orders, and the time.
type Snapshot struct {
	Tenant Tenant
	Orders defaults.Orders
	// Nodes are the tenant's Backend and Frontends by name.
	Nodes map[string]v2alpha1.Node
	// Pods are the pods of each node, by node name.
	Pods map[string][]Pod
	// MissingPods are, by node name, the pods the controllers of the node's
	// pods want beyond those that exist (a StatefulSet still creating or
	// replacing one): such a node is not Ready, whatever its pods say. Read
	// for the fresh snapshots every release is planned on; nil in a
	// snapshot of the cache, which then takes the pods as they are.
	MissingPods map[string]int
	// SetsConverged are the nodes in flight whose StatefulSet records that
	// their released rollout converged (DESIGN §2): every replica updated
	// and Ready at once, whatever happened to the pods since.
	// SetRevisions are, by node name, what a release records of the node's
	// StatefulSet (released-set-revision). Both are read for the fresh
	// snapshots every release is planned on; nil in a snapshot of the cache.
	SetsConverged map[string]bool
	SetRevisions  map[string]string
	// Now is when the snapshot was taken.
	Now time.Time
	// ProgressDeadline is how long a released node may take to become
	// Ready on its target before it is reported stalled; 0 turns it off.
	ProgressDeadline time.Duration
	// Grouping says how a change applied node by node is recognised as
	// one change.
	Grouping Grouping
}

// Grouping holds the change-grouping settings (DESIGN §4).
type Grouping struct {
	// LandingTimeout is how long a tenant whose live nodes disagree on
	// rollout-id is held before the sequencer proceeds with what landed;
	// 0 holds it until they agree.
	LandingTimeout time.Duration
	// SettleTime is how long after the latest target change of a tenant
	// without rollout-id its gated nodes are held; 0 turns it off.
	SettleTime time.Duration
	// SettleCap bounds the settle hold: a node's changes hold the tenant
	// no longer than this after its run of changes (each less than
	// SettleTime after the one before, or made while the settle hold still
	// holds it) began, however often it keeps changing; 0 means no cap.
	SettleCap time.Duration
}

// DefaultGrouping is the change grouping express-sequencer runs with unless
// told otherwise (--landing-timeout, --settle-time, --settle-cap), and what
// kubectl express plans with.
var DefaultGrouping = Grouping{LandingTimeout: 5 * time.Minute, SettleTime: 10 * time.Second, SettleCap: time.Minute}

// DefaultProgressDeadline is how long a released node may take to be Ready
// on its target before it is reported stuck (--progress-deadline).
const DefaultProgressDeadline = 15 * time.Minute

// Index names of the cache's field indexes.
const (
	// IndexTenant indexes Backends and Frontends by spec.clusterConfig.clusterName.
	IndexTenant = "spec.clusterConfig.clusterName"
	// IndexPodNode indexes pods by their express.medallia.com/node label.
	IndexPodNode = "metadata.labels.express.medallia.com/node"
)

// Gather reads a tenant's snapshot from the cache through the field indexes.
func Gather(ctx context.Context, r client.Reader, tenant Tenant, orders defaults.Orders, now time.Time, deadline time.Duration, grouping Grouping) (*Snapshot, error) {
	s := &Snapshot{
		Tenant: tenant, Orders: orders, Now: now, ProgressDeadline: deadline, Grouping: grouping,
		Nodes: map[string]v2alpha1.Node{}, Pods: map[string][]Pod{},
	}
	inTenant := []client.ListOption{client.InNamespace(tenant.Namespace), client.MatchingFields{IndexTenant: tenant.ClusterName}}
	var bes v2alpha1.BackendList
	if err := r.List(ctx, &bes, inTenant...); err != nil {
		return nil, fmt.Errorf("listing Backends of tenant %s: %w", tenant, err)
	}
	var fes v2alpha1.FrontendList
	if err := r.List(ctx, &fes, inTenant...); err != nil {
		return nil, fmt.Errorf("listing Frontends of tenant %s: %w", tenant, err)
	}
	for i := range bes.Items {
		s.Nodes[bes.Items[i].Name] = &bes.Items[i]
	}
	for i := range fes.Items {
		s.Nodes[fes.Items[i].Name] = &fes.Items[i]
	}
	for name := range s.Nodes {
		var pods corev1.PodList
		if err := r.List(ctx, &pods, client.InNamespace(tenant.Namespace), client.MatchingFields{IndexPodNode: name}); err != nil {
			return nil, fmt.Errorf("listing pods of %s/%s: %w", tenant.Namespace, name, err)
		}
		for i := range pods.Items {
			s.Pods[name] = append(s.Pods[name], PodOf(&pods.Items[i]))
		}
	}
	return s, nil
}

// condition returns the node's PrerequisitesReady condition, or nil.
func condition(n v2alpha1.Node) *metav1.Condition {
	return meta.FindStatusCondition(n.NodeStatus().Conditions, v2alpha1.ConditionPrerequisitesReady)
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
func GatherFresh(ctx context.Context, r client.Reader, tenant Tenant, orders defaults.Orders, now time.Time, deadline time.Duration, grouping Grouping) (*Snapshot, error) {
	read, err := freshReads(ctx, r, tenant.Namespace)
	if err != nil {
		return nil, err
	}
	s := freshSnapshot(read, tenant, orders, now)
	s.ProgressDeadline, s.Grouping = deadline, grouping
	return s, nil
}

// GatherFreshFor reads, straight from the API server, the snapshot of the
// tenant of the node called name: what the pod admission webhook decides
// on, with the sequencer's change grouping. It returns nil when no Backend
// or Frontend has that name.
func GatherFreshFor(ctx context.Context, r client.Reader, namespace, name string, orders defaults.Orders, now time.Time, grouping Grouping) (*Snapshot, error) {
	read, err := freshReads(ctx, r, namespace)
	if err != nil {
		return nil, err
	}
	i := slices.IndexFunc(read.nodes, func(n v2alpha1.Node) bool { return n.GetName() == name })
	if i < 0 {
		return nil, nil
	}
	s := freshSnapshot(read, Tenant{Namespace: namespace, ClusterName: read.nodes[i].NodeSpec().ClusterConfig.ClusterName}, orders, now)
	s.Grouping = grouping
	return s, nil
}

// fresh is what freshReads lists of a namespace.
type fresh struct {
	nodes        []v2alpha1.Node
	pods         []corev1.Pod
	statefulSets []appsv1.StatefulSet
	// lostMachines are the Nodes (machines) Ready pods are bound to that
	// no longer exist or are not Ready: their pods are not Ready, whatever
	// their stale status says (no kubelet is left to say otherwise).
	lostMachines map[string]bool
}

// freshReads lists, at the same time, the namespace's Backends, Frontends,
// Express pods (labelled express.medallia.com/node) and StatefulSets: one
// round trip's latency instead of four. Each list is as fresh as the API
// server at its moment; the moments lie within one round trip, as they did
// read one after the other. StatefulSets the sequencer may not list (an
// installation whose RBAC predates the read) are logged once and left out:
// pods are then taken as they are, however many their StatefulSet wants.
func freshReads(ctx context.Context, r client.Reader, namespace string) (fresh, error) {
	var bes v2alpha1.BackendList
	var fes v2alpha1.FrontendList
	var pods corev1.PodList
	var sets appsv1.StatefulSetList
	var g errgroup.Group
	g.Go(func() error {
		if err := r.List(ctx, &bes, client.InNamespace(namespace)); err != nil {
			return fmt.Errorf("listing Backends in %s: %w", namespace, err)
		}
		return nil
	})
	g.Go(func() error {
		if err := r.List(ctx, &fes, client.InNamespace(namespace)); err != nil {
			return fmt.Errorf("listing Frontends in %s: %w", namespace, err)
		}
		return nil
	})
	g.Go(func() error {
		if err := r.List(ctx, &pods, client.InNamespace(namespace), client.HasLabels{v2alpha1.LabelNode}); err != nil {
			return fmt.Errorf("listing the Express pods of %s: %w", namespace, err)
		}
		return nil
	})
	g.Go(func() error {
		err := r.List(ctx, &sets, client.InNamespace(namespace))
		if apierrors.IsForbidden(err) {
			statefulSetsForbidden.Do(func() {
				log.FromContext(ctx).Error(err, "Taking Express pods as they are, however many their StatefulSet wants: the sequencer may not list StatefulSets (RBAC list on statefulsets in group apps)")
			})
			return nil
		}
		if err != nil {
			return fmt.Errorf("listing the StatefulSets of %s: %w", namespace, err)
		}
		return nil
	})
	if err := g.Wait(); err != nil {
		return fresh{}, err
	}
	lost, err := lostMachines(ctx, r, pods.Items)
	if err != nil {
		return fresh{}, err
	}
	return fresh{nodes: nodesOf(bes.Items, fes.Items), pods: pods.Items, statefulSets: sets.Items, lostMachines: lost}, nil
}

// lostMachines reads, by name, the Nodes (machines) the Ready pods are
// bound to, and returns those that no longer exist or are not Ready. A
// machine that vanishes takes every pod on it, but the pods' status still
// says Ready until the pod garbage collector deletes them (40 s after the
// Node object is gone), or the node lifecycle controller marks them (its
// grace period after the last heartbeat): a recreated pod of a later node
// must not start before them. A sequencer that may not read Nodes (RBAC
// get on nodes) logs it once and takes the pods as they are.
func lostMachines(ctx context.Context, r client.Reader, pods []corev1.Pod) (map[string]bool, error) {
	var names []string
	for i := range pods {
		ready := pods[i].DeletionTimestamp == nil && slices.ContainsFunc(pods[i].Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		})
		if m := pods[i].Spec.NodeName; m != "" && ready && !slices.Contains(names, m) {
			names = append(names, m)
		}
	}
	lost := make([]bool, len(names))
	var g errgroup.Group
	for i, name := range names {
		g.Go(func() error {
			var m corev1.Node
			err := r.Get(ctx, client.ObjectKey{Name: name}, &m)
			switch {
			case apierrors.IsNotFound(err):
				lost[i] = true
			case apierrors.IsForbidden(err):
				nodesForbidden.Do(func() {
					log.FromContext(ctx).Error(err, "Taking Express pods as Ready on whatever machine they run: the sequencer may not read Nodes (RBAC get on nodes)")
				})
			case err != nil:
				return fmt.Errorf("reading Node %s: %w", name, err)
			default:
				lost[i] = !slices.ContainsFunc(m.Status.Conditions, func(c corev1.NodeCondition) bool {
					return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
				})
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var out map[string]bool
	for i, name := range names {
		if lost[i] {
			if out == nil {
				out = map[string]bool{}
			}
			out[name] = true
		}
	}
	return out, nil
}

// nodesForbidden logs once per process that Nodes may not be read.
var nodesForbidden sync.Once

// statefulSetsForbidden logs once per process that StatefulSets may not be
// listed: every release and every pod admission would log it again.
var statefulSetsForbidden sync.Once

// freshSnapshot builds the tenant's snapshot from what freshReads listed of
// its namespace. Only the tenant's own pods are counted against their
// StatefulSets: the namespace may hold other tenants, whose controllers this
// snapshot has no business reading.
func freshSnapshot(read fresh, tenant Tenant, orders defaults.Orders, now time.Time) *Snapshot {
	s := &Snapshot{Tenant: tenant, Orders: orders, Now: now, Nodes: map[string]v2alpha1.Node{}, Pods: map[string][]Pod{}}
	for _, n := range read.nodes {
		if n.NodeSpec().ClusterConfig.ClusterName == tenant.ClusterName {
			s.Nodes[n.GetName()] = n
		}
	}
	var own []*corev1.Pod
	for i := range read.pods {
		name := read.pods[i].Labels[v2alpha1.LabelNode]
		if _, ok := s.Nodes[name]; ok {
			pod := PodOf(&read.pods[i])
			if read.lostMachines[read.pods[i].Spec.NodeName] {
				pod.Conditions[string(corev1.PodReady)] = string(corev1.ConditionFalse)
			}
			s.Pods[name] = append(s.Pods[name], pod)
			own = append(own, &read.pods[i])
		}
	}
	s.MissingPods = missingPods(own, read.statefulSets, s.Nodes)
	s.SetRevisions = setRevisions(read.statefulSets, s.Nodes)
	s.SetsConverged = setsConverged(s, read.statefulSets)
	return s
}
