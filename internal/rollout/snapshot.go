package rollout

import (
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

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
	// Name of the pod, and its UID.
	Name string
	UID  types.UID
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
	// Owners are the pod's owner references, Created its creation time:
	// whether it belongs to the node as it is now, not to an earlier node
	// of the same name (podCountsFor).
	Owners  []metav1.OwnerReference
	Created metav1.Time
	// Failing: the pod will not become Ready by itself — it failed, or a
	// container is crash-looping or cannot start (FailingPod). A pod that
	// is not Ready without failing (starting, a readiness blip, restarted
	// in place once) is expected to become Ready by itself.
	Failing bool
	// WouldHold: in audit mode, the pod webhook would have created it
	// scheduling-gated and the plan has not yet said it would let it go
	// (AnnotationWouldHoldPod without AnnotationWouldReleaseAt).
	WouldHold bool
	// Deleting: the pod is being deleted (it counts as not Ready).
	Deleting bool
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
	_, failing := FailingContainer(p)
	return p.Status.Phase == corev1.PodFailed || failing
}

// FailingContainer returns the first of a pod's containers, init
// containers included, that waits for a reason it does not leave by itself
// (failingWaits), and false when none does.
func FailingContainer(p *corev1.Pod) (corev1.ContainerStatus, bool) {
	for _, statuses := range [][]corev1.ContainerStatus{p.Status.InitContainerStatuses, p.Status.ContainerStatuses} {
		for _, c := range statuses {
			if w := c.State.Waiting; w != nil && slices.Contains(failingWaits, w.Reason) {
				return c, true
			}
		}
	}
	return corev1.ContainerStatus{}, false
}

// HeldBySequencer reports whether the pod carries the sequencer's
// scheduling gate.
func (p Pod) HeldBySequencer() bool { return slices.Contains(p.Gates, v2alpha1.GateSequencer) }

// WouldHoldAnnotations keeps, of a pod's annotations, the two of audit
// mode's hold (Pod.WouldHold); nil when it has neither.
func WouldHoldAnnotations(annotations map[string]string) map[string]string {
	var out map[string]string
	for _, k := range []string{v2alpha1.AnnotationWouldHoldPod, v2alpha1.AnnotationWouldReleaseAt} {
		if v, ok := annotations[k]; ok {
			if out == nil {
				out = make(map[string]string, 2)
			}
			out[k] = v
		}
	}
	return out
}

// PodReady reports whether a plan takes pod p as Ready, as PodOf reads it:
// its Ready condition (the last, should it have more than one) True, and
// the pod not being deleted.
func PodReady(p *corev1.Pod) bool {
	ready := false
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			ready = c.Status == corev1.ConditionTrue
		}
	}
	return ready && p.DeletionTimestamp == nil
}

// PodOf reads a pod into a Pod. A pod that is being deleted counts as not
// Ready, and in no other state a prerequisite may name
// (podConditionType), whatever its conditions still say (inNoState).
func PodOf(p *corev1.Pod) Pod {
	out := Pod{
		Name:       p.Name,
		UID:        p.UID,
		Conditions: make(map[string]string, len(p.Status.Conditions)),
		Version:    p.Labels[v2alpha1.LabelExpressVersion],
		Revision:   p.Labels[v2alpha1.LabelDeploymentRevision],
		Hash:       p.Labels[v2alpha1.LabelTargetHash],
		Owners:     p.OwnerReferences,
		Created:    p.CreationTimestamp,
		Failing:    FailingPod(p),
		WouldHold:  p.Annotations[v2alpha1.AnnotationWouldHoldPod] != "" && p.Annotations[v2alpha1.AnnotationWouldReleaseAt] == "",
		Deleting:   p.DeletionTimestamp != nil,
	}
	for _, g := range p.Spec.SchedulingGates {
		out.Gates = append(out.Gates, g.Name)
	}
	for _, c := range p.Status.Conditions {
		out.Conditions[string(c.Type)] = string(c.Status)
	}
	if p.DeletionTimestamp != nil {
		out.Conditions = inNoState()
	}
	return out
}

// inNoState are the conditions of a pod that is going — being deleted, or
// on a machine that is lost, where no kubelet is left to say otherwise —
// whatever its status still says: none, so that it is not Ready and meets
// no condition a prerequisite may ask for (ContainersReady, Initialized,
// …, True or False): no requirement is met by a pod that is not there to
// serve.
func inNoState() map[string]string {
	return map[string]string{}
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
	// SetsConverged are the nodes in flight, or gated again on the target
	// they were released for, whose StatefulSet records that their
	// released rollout converged (DESIGN §2): every replica updated
	// and Ready at once, whatever happened to the pods since.
	// SetRevisions are, by node name, what a release records of the node's
	// StatefulSet (released-set-revision). Both are read for the fresh
	// snapshots every release is planned on; nil in a snapshot of the cache.
	SetsConverged map[string]bool
	SetRevisions  map[string]string
	// SetTemplates are, by node name, the pod templates of the node's
	// StatefulSets that have replicas: what a release's pods would be made
	// from until the operator carries it out (runsAnotherTarget). Nil in a
	// snapshot of the cache.
	SetTemplates map[string][]Template
	// Now is when the snapshot was taken.
	Now time.Time
	// ProgressDeadline is how long a released node may take to become
	// Ready on its target before it is reported stalled; 0 turns it off.
	ProgressDeadline time.Duration
	// Grouping says how a change applied node by node is recognised as
	// one change.
	Grouping Grouping
	// Virtual are, in audit mode (AuditView), the nodes whose gate exists
	// in this snapshot only: the hold enforcing would have.
	Virtual map[string]bool
	// VirtualPods are, in audit mode, the pods (by name) whose sequencer
	// scheduling gate exists in this snapshot only: those the pod webhook
	// would have created gated (Pod.WouldHold).
	VirtualPods map[string]bool
	// SharedNames are the names of the tenant's nodes that a Backend and a
	// Frontend of the namespace share, in this tenant or across two: pods
	// name their node by name alone (label express.medallia.com/node), so
	// no pod of such a name can be told to be the node's. None counts for
	// it, and none is let go (sharedName). Read from the namespace's nodes
	// (SnapshotOf on a fresh read); the validating webhook refuses the
	// second of such a pair, but two created at one instant both pass.
	SharedNames map[string]bool
}

// Grouping holds the change-grouping settings (DESIGN §4).
type Grouping struct {
	// LandingTimeout is how long a tenant whose live nodes disagree on
	// rollout-id is held before the sequencer proceeds with what landed;
	// 0 holds it until they agree.
	LandingTimeout time.Duration
	// SettleTime is how long after the latest change (of a target or an
	// order) of a tenant
	// without rollout-id its gated nodes are held; 0 turns it off.
	SettleTime time.Duration
	// SettleCap bounds the settle hold: a node's changes hold the tenant
	// no longer than this in all over its run of changes (each less than
	// SettleTime after the one before, or made while the settle hold still
	// holds it; Admission.runBegan), however often it keeps changing; 0
	// means no cap.
	SettleCap time.Duration
}

// DefaultGrouping is the change grouping express-sequencer runs with unless
// told otherwise (--landing-timeout, --settle-time, --settle-cap), and what
// kubectl express plans with.
var DefaultGrouping = Grouping{LandingTimeout: 5 * time.Minute, SettleTime: 10 * time.Second, SettleCap: time.Minute}

// DefaultProgressDeadline is how long a released node may take to be Ready
// on its target before it is reported stuck (--progress-deadline).
const DefaultProgressDeadline = 15 * time.Minute

// Objects are what a fresh read found of a tenant's namespace: the objects
// SnapshotOf builds a snapshot from.
type Objects struct {
	// Nodes are Backends and Frontends of the namespace; those of other
	// tenants are left out of the snapshot.
	Nodes []v2alpha1.Node
	// Pods are Express pods (labelled express.medallia.com/node) of the
	// namespace; those of other tenants' nodes are left out.
	Pods []corev1.Pod
	// StatefulSets are the namespace's StatefulSets, none when they may
	// not be read (StatefulSetsUnread): pods are then taken as they are.
	StatefulSets []appsv1.StatefulSet
	// StatefulSetsUnread: the StatefulSets could not be read (RBAC), not
	// that there are none: a pod of a StatefulSet not among them is judged
	// by its creation time, not taken for an orphan (podCountsFor).
	StatefulSetsUnread bool
	// LostMachines are the Nodes (machines) pods are bound to that no
	// longer exist or are not Ready: their pods meet no condition, whatever
	// their stale status says (no kubelet is left to say otherwise;
	// inNoState).
	LostMachines map[string]bool
}

// SnapshotOf builds the tenant's snapshot from what a fresh read found of
// its namespace. Only the tenant's own pods are counted against their
// StatefulSets: the namespace may hold other tenants, whose controllers this
// snapshot has no business reading.
func SnapshotOf(read Objects, tenant Tenant, orders defaults.Orders, now time.Time) *Snapshot {
	s := &Snapshot{Tenant: tenant, Orders: orders, Now: now, Nodes: map[string]v2alpha1.Node{}, Pods: map[string][]Pod{}}
	for _, n := range read.Nodes {
		if n.NodeSpec().ClusterConfig.ClusterName == tenant.ClusterName {
			s.Nodes[n.GetName()] = n
		}
	}
	s.SharedNames = sharedNames(read.Nodes, s.Nodes)
	// Only the workload of each node as it is now counts, not that of an
	// earlier node of the same name (incarnation.go).
	all := setsByUID(read.StatefulSets)
	sets := currentSets(read.StatefulSets, s.Nodes)
	var own []*corev1.Pod
	for i := range read.Pods {
		name := read.Pods[i].Labels[v2alpha1.LabelNode]
		n, ok := s.Nodes[name]
		if !ok || s.SharedNames[name] {
			continue
		}
		pod := PodOf(&read.Pods[i])
		if !podCountsFor(pod, n, all, !read.StatefulSetsUnread) {
			continue
		}
		if read.LostMachines[read.Pods[i].Spec.NodeName] {
			pod.Conditions = inNoState()
		}
		s.Pods[name] = append(s.Pods[name], pod)
		own = append(own, &read.Pods[i])
	}
	s.MissingPods = missingPods(own, sets, s.Nodes)
	s.SetRevisions = setRevisions(sets, s)
	s.SetTemplates = setTemplates(sets, s.Nodes) // before setsConverged, which reads them
	s.SetsConverged = setsConverged(s, sets)
	return s
}
