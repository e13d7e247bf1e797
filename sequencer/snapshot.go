package sequencer

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/defaults"
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
}

// PodOf reads a pod into a Pod. A pod that is being deleted counts as not
// Ready, whatever its conditions still say.
func PodOf(p *corev1.Pod) Pod {
	out := Pod{
		Name:       p.Name,
		Conditions: make(map[string]string, len(p.Status.Conditions)),
		Version:    p.Labels[v2alpha1.LabelExpressVersion],
		Revision:   p.Labels[v2alpha1.LabelDeploymentRevision],
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
	// Now is when the snapshot was taken.
	Now time.Time
	// ProgressDeadline is how long a released node may take to become
	// Ready on its target before it is reported stalled; 0 turns it off.
	ProgressDeadline time.Duration
	// SettleTime is how long after the tenant's latest target change no
	// gated node is released; 0 turns it off.
	SettleTime time.Duration
}

// latestChange returns when a node of the tenant last changed target, as
// the webhook stamped it; zero when none did.
func (s *Snapshot) latestChange() time.Time {
	var latest time.Time
	for _, n := range s.Nodes {
		t, err := time.Parse(time.RFC3339Nano, n.GetAnnotations()[v2alpha1.AnnotationTargetChangedAt])
		if err == nil && t.After(latest) {
			latest = t
		}
	}
	return latest
}

// Index names of the cache's field indexes.
const (
	// IndexTenant indexes Backends and Frontends by spec.clusterConfig.clusterName.
	IndexTenant = "spec.clusterConfig.clusterName"
	// IndexPodNode indexes pods by their express.medallia.com/node label.
	IndexPodNode = "metadata.labels.express.medallia.com/node"
)

// Gather reads a tenant's snapshot from the cache through the field indexes.
func Gather(ctx context.Context, r client.Reader, tenant Tenant, orders defaults.Orders, now time.Time, deadline, settle time.Duration) (*Snapshot, error) {
	s := &Snapshot{
		Tenant: tenant, Orders: orders, Now: now, ProgressDeadline: deadline, SettleTime: settle,
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
	nodes := make([]v2alpha1.Node, 0, len(bes.Items)+len(fes.Items))
	for i := range bes.Items {
		nodes = append(nodes, &bes.Items[i])
	}
	for i := range fes.Items {
		nodes = append(nodes, &fes.Items[i])
	}
	return nodes, nil
}
