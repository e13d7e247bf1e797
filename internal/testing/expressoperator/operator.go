// Package expressoperator does the Express operator's job and nothing
// more, for a control plane that runs Kubernetes' own control loops
// (controlplane.Cluster): per node CR one StatefulSet named after the node
// and owned by it, its pod template labelled with the node's name, target
// hash, version and revision (docs/express-operator-contract.md). It honours
// the CR gates — while a node carries any gate it neither rolls it out nor
// (re)provisions it — updates the StatefulSet's template on a target change,
// and scales it to 0 for a node that is down or being deleted. Pods are
// created and replaced by the StatefulSet controller, scheduled by
// kube-scheduler and made Ready by KWOK. The one pod the operator touches
// is a failing one left on an old template once the new one is out: the
// StatefulSet controller's rolling update (OrderedReady) waits for it to
// become Ready, forever (kubernetes/kubernetes#67250), so an operator that
// rolls a crashed node out deletes it.
//
// Like the Express operator, it reports on the node's status, in a
// condition of its own (Available: its StatefulSet's pods Ready out of
// those it wants), written by server-side apply as its own field manager
// whenever that changes: the node's status is shared with the sequencer's
// PrerequisitesReady condition (DESIGN §1), whose writes meet these.
package expressoperator

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	acv2alpha1 "github.com/medallia/express-sequencer/internal/applyconfiguration/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// Operator is the Express operator's job on StatefulSets.
type Operator struct {
	// Client reads from the operator's cache and writes to the API server:
	// the manager's client when nil.
	Client client.Client
	// Replicas is how many pods a node runs (1 when nil or 0).
	Replicas func(v2alpha1.Node) int32
	// StartAfter and ReadyAfter are how long KWOK takes to start a pod and
	// then to make it Ready (annotations of the pod template).
	StartAfter, ReadyAfter time.Duration
	// ReadyAfterOf, when set and positive for a node, is how long KWOK
	// takes to make its pods Ready instead of ReadyAfter.
	ReadyAfterOf func(v2alpha1.Node) time.Duration
	// GracePeriod is how long a node's deleted pods stay Terminating (0 when
	// nil: gone at once).
	GracePeriod func(v2alpha1.Node) time.Duration
	// Stuck, when set and true for a node, stands for a build that never
	// becomes Ready: the pod template the operator writes next for the node
	// carries controlplane.HoldReadyAnnotation, which KWOK's pod-ready
	// stage does not match (its pods run, not Ready, not failing). Once it
	// is false again the operator takes the annotation off the node's pods
	// (KWOK then makes them Ready); the template keeps it until the node's
	// next target, so that Stuck alone never rolls a node.
	Stuck func(v2alpha1.Node) bool
	// Broken, when set, breaks the contract for a node on purpose (the
	// conformance kit's proof that each clause can fail).
	Broken func(v2alpha1.Node) Breakage

	downSince sync.Map // StatefulSet UID → when a DeletesWhenDownLater operator saw it down
	specSince sync.Map // node UID → specSeen: when a Debounce operator first saw the node's generation
	active    sync.Map // namespace → *atomic.Int64: reconciles of its nodes under way
}

// Quiet reports whether no reconcile of a node of namespace ns is under
// way: one that starts after a Breakage set before Quiet returned true
// reads that Breakage (a test that pauses the operator waits for it, so
// that no write of a reconcile that began before the pause lands after).
func (o *Operator) Quiet(ns string) bool {
	n, ok := o.active.Load(ns)
	return !ok || n.(*atomic.Int64).Load() == 0
}

// specSeen is a generation of a node and when the operator first saw it.
type specSeen struct {
	generation int64
	at         time.Time
}

// Breakage is how an operator broken on purpose departs from
// docs/express-operator-contract.md; the zero value keeps it.
type Breakage struct {
	// IgnoresGates rolls out and provisions a node whatever gates it
	// carries (§1).
	IgnoresGates bool
	// ProvisionsGated honours gates only on a node it has provisioned: a
	// gated node with no StatefulSet yet is provisioned whatever its gates
	// (§1: do not provision it).
	ProvisionsGated bool
	// ReprovisionsGated honours gates only on a node that runs: a gated
	// node brought back up (its StatefulSet scaled to zero) is provisioned
	// again whatever its gates (§1: do not reprovision it).
	ReprovisionsGated bool
	// RollsGatedFrontends honours gates on a Frontend only to provision
	// it: a gated Frontend that runs is rolled out anyway (as an operator
	// whose Frontend controller checks the gates on its provisioning path
	// only would), while a Backend's gates hold.
	RollsGatedFrontends bool
	// RollsGatedRevisionChanges deploys a change of spec.deploymentRevision
	// whatever gates the node carries (as an operator whose revision path
	// does not check the gates its version path checks), while its other
	// changes are held.
	RollsGatedRevisionChanges bool
	// NoTargetHash leaves the target-hash label off the pod template
	// (§2).
	NoTargetHash bool
	// RelabelsPods, as it rolls a node to a new version, first relabels
	// the node's running pods with the new target's labels (§2: a
	// pod's target-hash is the target it was made for): until each is
	// replaced, a pod of the old version reads as one of the new.
	RelabelsPods bool
	// RollsOnVersionOnly keeps the pod template as it is while the
	// node's version and revision stay the same: a config-only change,
	// or one to a field it does not act on, is not rolled (§2).
	RollsOnVersionOnly bool
	// ReplacesConditions writes its condition by replacing the whole
	// conditions list, another writer's conditions lost (§3).
	ReplacesConditions bool
	// RewritesConditions writes its condition with the whole list, every
	// other writer's condition kept but its observedGeneration set to the
	// node's generation (§3): an old completion then reads as the current
	// one's.
	RewritesConditions bool
	// ForgesCompletion writes, with its own condition, the sequencer's
	// PrerequisitesReady — reason RolloutComplete, observed at the node's
	// generation — once its pods are Ready, as an operator that kept its
	// own ordering might (§3: leave it alone): the sequencer's release
	// record then says a rollout completed that it never released.
	ForgesCompletion bool
	// Partition rolls the StatefulSet with a partition as large as its
	// replicas (§2): its controller never completes a rollout.
	Partition bool
	// DeletesWhenDown deletes the StatefulSet of a node set up: false,
	// instead of scaling it to 0 (§1).
	DeletesWhenDown bool
	// RebuildsWhenDown scales the StatefulSet of a node set up: false to
	// 0, its pod template rebuilt from the node's spec as it is now, gated
	// changes and all (§1: the template is the record of what the node
	// last ran): brought back up, the node comes back on a change it was
	// never let go for.
	RebuildsWhenDown bool
	// DeletesWhenDownLater scales the StatefulSet of a node set up: false
	// to 0, as the contract asks, then deletes it a second after its last
	// pod went (§1: it keeps it while the node is down).
	DeletesWhenDownLater bool
	// RecreatesSetOnChange rolls a node to a new target by deleting its
	// StatefulSet and making a new one of the same name (§2: the node's
	// one StatefulSet is rolled).
	RecreatesSetOnChange bool
	// MasksFailures deletes a failing pod at once, on its target too: the
	// crash the kubelet reports is hidden behind pods forever starting
	// (§2).
	MasksFailures bool
	// RecreateDelay holds every new pod of the node behind a scheduling
	// gate of its own for this long (§4: recovery waits for nothing but
	// the sequencer's gate).
	RecreateDelay time.Duration
	// NamesSetsOtherwise names the node's StatefulSet "<node>-set", not
	// after the node (§2): a decision cannot read it by name.
	NamesSetsOtherwise bool
	// Debounce has the operator act on a node only once its spec has not
	// changed for this long (a settle time: every change, a gate's removal
	// too, starts it again). With IgnoresGates it holds a gated node for
	// as long as a hold window shorter than the debounce watches, and rolls
	// it after (§1: the gate is what holds it, not the operator's pace).
	Debounce time.Duration
	// Paused: the operator does nothing for the node for now (a test
	// holds it still while it changes what it is testing).
	Paused bool
	// OrdersBy has the operator order the tenant's rollouts itself, as the
	// Express operator does today from the old chart's allNodeConfig: it
	// neither rolls nor provisions a node while a node its list names is
	// not Ready on its own target. The ordering audit mode compares the
	// sequencer's with; once a namespace enforces it breaks §1 (the gate is
	// the only hold) wherever the orders differ, and can deadlock with the
	// sequencer.
	OrdersBy *Lists
	// OrdersByItsLists has the operator order by the node's own
	// deploymentDependencies, version pins included (revision pins and
	// pod conditions are not read), as the Express operator does
	// with the lists the old chart renders: it breaks §1 (the gate is the
	// only hold) where the sequencer releases past a circular wait.
	OrdersByItsLists bool
}

// Lists are an operator's own ordering table, by node key (be, fe1, …):
// whom each node's upgrade, and its provisioning, waits for.
type Lists struct{ Upgrade, Provisioning map[string][]string }

// PerNamespace is how the operator breaks the contract in each namespace
// (not at all by default): its Of is an Operator's Broken.
type PerNamespace struct{ m sync.Map }

// Set has the operator break the contract in namespace ns as b says.
func (p *PerNamespace) Set(ns string, b Breakage) { p.m.Store(ns, b) }

// Of is how the operator breaks the contract for node n.
func (p *PerNamespace) Of(n v2alpha1.Node) Breakage {
	b, _ := p.m.Load(n.GetNamespace())
	out, _ := b.(Breakage)
	return out
}

// WarmUpGate is the scheduling gate of an operator broken with
// RecreateDelay.
const WarmUpGate = "express-operator.example.com/warm-up"

func (o *Operator) broken(n v2alpha1.Node) Breakage {
	if o.Broken == nil {
		return Breakage{}
	}
	return o.Broken(n)
}

// nodeRef is the operator's work item: one node of either kind.
type nodeRef struct {
	Kind string
	types.NamespacedName
}

// SetupWithManager runs the operator on mgr (controlplane's
// StartController runs it in a manager of its own).
func (o *Operator) SetupWithManager(mgr ctrl.Manager) error {
	if o.Client == nil {
		o.Client = mgr.GetClient()
	}
	byKind := func(kind string) handler.TypedEventHandler[client.Object, nodeRef] {
		return handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []nodeRef {
			return []nodeRef{{Kind: kind, NamespacedName: client.ObjectKeyFromObject(obj)}}
		})
	}
	ownerNode := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []nodeRef {
		for _, ref := range obj.GetOwnerReferences() {
			if ref.APIVersion == v2alpha1.GroupVersion.String() {
				return []nodeRef{{Kind: ref.Kind, NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: ref.Name}}}
			}
		}
		return nil
	})
	return builder.TypedControllerManagedBy[nodeRef](mgr).
		Named("express-operator").
		WithOptions(controller.TypedOptions[nodeRef]{SkipNameValidation: ptr.To(true)}). // a test process may run it more than once
		Watches(&v2alpha1.Backend{}, byKind(v2alpha1.KindBackend)).
		Watches(&v2alpha1.Frontend{}, byKind(v2alpha1.KindFrontend)).
		Watches(&appsv1.StatefulSet{}, ownerNode).
		Watches(&corev1.Pod{}, handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []nodeRef {
			name := obj.GetLabels()[v2alpha1.LabelNode]
			if name == "" {
				return nil
			}
			// Whichever kind the node is, the other finds nothing.
			key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}
			return []nodeRef{{Kind: v2alpha1.KindBackend, NamespacedName: key}, {Kind: v2alpha1.KindFrontend, NamespacedName: key}}
		})).
		Complete(reconcile.TypedFunc[nodeRef](o.reconcile))
}

func (o *Operator) reconcile(ctx context.Context, ref nodeRef) (reconcile.Result, error) {
	active, _ := o.active.LoadOrStore(ref.Namespace, &atomic.Int64{})
	active.(*atomic.Int64).Add(1)
	defer active.(*atomic.Int64).Add(-1)
	n := v2alpha1.NewNode(ref.Kind)
	if err := o.Client.Get(ctx, ref.NamespacedName, n); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err) // its StatefulSet goes with it (garbage collector)
	}
	if o.broken(n).Paused {
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	if wait := o.unsettled(n, o.broken(n).Debounce); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, nil
	}
	set := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: o.setName(n), Namespace: n.GetNamespace()}}
	err := o.Client.Get(ctx, client.ObjectKeyFromObject(set), set)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return reconcile.Result{}, err
	}
	if err := o.releaseHeldPods(ctx, n); err != nil {
		return reconcile.Result{}, err
	}
	if exists {
		if err := o.reportAvailable(ctx, n, set); err != nil {
			return reconcile.Result{}, err
		}
	}
	broken := o.broken(n)
	warmUp, err := o.warmUp(ctx, n, broken.RecreateDelay)
	if err != nil {
		return reconcile.Result{}, err
	}
	switch {
	case broken.DeletesWhenDown && !n.NodeSpec().IsUp() && exists:
		return reconcile.Result{}, client.IgnoreNotFound(o.Client.Delete(ctx, set))
	case broken.DeletesWhenDownLater && !n.NodeSpec().IsUp() && exists && ptr.Deref(set.Spec.Replicas, 1) == 0 && set.Status.Replicas == 0:
		if wait := o.downFor(set); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		return reconcile.Result{}, client.IgnoreNotFound(o.Client.Delete(ctx, set))
	case !n.NodeSpec().IsUp() || n.GetDeletionTimestamp() != nil:
		if exists && ptr.Deref(set.Spec.Replicas, 1) != 0 {
			set.Spec.Replicas = ptr.To[int32](0)
			if broken.RebuildsWhenDown {
				set.Spec.Template = o.statefulSet(n).Spec.Template
			}
			return reconcile.Result{}, o.Client.Update(ctx, set)
		}
		return reconcile.Result{}, nil
	case v2alpha1.IsGated(n) && !broken.IgnoresGates && !(broken.ProvisionsGated && !exists) &&
		!(broken.ReprovisionsGated && exists && ptr.Deref(set.Spec.Replicas, 1) == 0) &&
		!(broken.RollsGatedFrontends && exists && n.NodeKind() == v2alpha1.KindFrontend) &&
		!(broken.RollsGatedRevisionChanges && exists && set.Spec.Template.Labels[v2alpha1.LabelDeploymentRevision] != n.NodeSpec().DeploymentRevision):
		return reconcile.Result{}, nil // neither rolled out nor (re)provisioned
	}
	want := o.statefulSet(n)
	if (broken.OrdersBy != nil || broken.OrdersByItsLists) && !(exists && maps.Equal(set.Spec.Template.Labels, want.Spec.Template.Labels)) {
		if waits, err := o.waitsFor(ctx, n, listOf(n, broken, exists)); err != nil || waits {
			return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, err
		}
	}
	if broken.RollsOnVersionOnly && exists && set.Spec.Template.Labels[v2alpha1.LabelExpressVersion] == want.Spec.Template.Labels[v2alpha1.LabelExpressVersion] &&
		set.Spec.Template.Labels[v2alpha1.LabelDeploymentRevision] == want.Spec.Template.Labels[v2alpha1.LabelDeploymentRevision] {
		want.Spec.Template = set.Spec.Template // what it does not act on is not rolled
	}
	if broken.RecreatesSetOnChange && exists && !maps.Equal(set.Spec.Template.Labels, want.Spec.Template.Labels) {
		if set.DeletionTimestamp != nil {
			return reconcile.Result{}, nil // made again once it is gone
		}
		return reconcile.Result{}, client.IgnoreNotFound(o.Client.Delete(ctx, set, client.PropagationPolicy(metav1.DeletePropagationForeground)))
	}
	if !exists {
		if err := controllerutil.SetControllerReference(n, want, o.Client.Scheme()); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, o.Client.Create(ctx, want)
	}
	owner := metav1.GetControllerOf(set)
	adopted := owner != nil && owner.UID == n.GetUID()
	if !adopted && set.DeletionTimestamp != nil {
		return reconcile.Result{}, nil // an earlier node's, being deleted: the new one is created once it is gone
	}
	if adopted && ptr.Deref(set.Spec.Replicas, 1) == *want.Spec.Replicas && maps.Equal(set.Spec.Template.Labels, want.Spec.Template.Labels) &&
		maps.Equal(withoutHold(set.Spec.Template.Annotations), withoutHold(want.Spec.Template.Annotations)) {
		return reconcile.Result{RequeueAfter: warmUp}, o.deleteFailingOldPods(ctx, n, broken.MasksFailures)
	}
	// A StatefulSet left by an earlier node of the name (kubectl delete
	// --cascade=orphan, then create) is adopted: controlled by the node as
	// it is now, its pods count for it.
	if err := controllerutil.SetControllerReference(n, set, o.Client.Scheme()); err != nil {
		return reconcile.Result{}, err
	}
	if broken.RelabelsPods && set.Spec.Template.Labels[v2alpha1.LabelExpressVersion] != want.Spec.Template.Labels[v2alpha1.LabelExpressVersion] {
		if err := o.relabelPods(ctx, n, want.Spec.Template.Labels); err != nil {
			return reconcile.Result{}, err
		}
	}
	set.Spec.Replicas = want.Spec.Replicas
	set.Spec.Template = want.Spec.Template // a new target rolls the pods (the StatefulSet's rolling update)
	set.Spec.UpdateStrategy = want.Spec.UpdateStrategy
	return reconcile.Result{RequeueAfter: warmUp}, o.Client.Update(ctx, set)
}

// relabelPods gives node n's pods labels, as a RelabelsPods operator does.
func (o *Operator) relabelPods(ctx context.Context, n v2alpha1.Node, labels map[string]string) error {
	var pods corev1.PodList
	if err := o.Client.List(ctx, &pods, client.InNamespace(n.GetNamespace()), client.MatchingLabels{v2alpha1.LabelNode: n.GetName()}); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		patch := client.MergeFrom(p.DeepCopy())
		maps.Copy(p.Labels, labels)
		if err := o.Client.Patch(ctx, p, patch); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// annotations are node n's pod template's: KWOK's delays, the
// configChangeset, and the hold of a stuck build.
func (o *Operator) annotations(n v2alpha1.Node) map[string]string {
	ready := o.ReadyAfter
	if o.ReadyAfterOf != nil && o.ReadyAfterOf(n) > 0 {
		ready = o.ReadyAfterOf(n)
	}
	a := controlplane.PodDelays(o.StartAfter, ready)
	if cs := n.NodeSpec().ConfigChangeset; cs != "" {
		a[controlplane.ConfigAnnotation] = cs
	}
	if o.stuck(n) {
		a[controlplane.HoldReadyAnnotation] = "true"
	}
	return a
}

// downFor is how much longer a DeletesWhenDownLater operator keeps
// StatefulSet set, down, before it deletes it.
func (o *Operator) downFor(set *appsv1.StatefulSet) time.Duration {
	since, _ := o.downSince.LoadOrStore(set.UID, time.Now())
	return time.Until(since.(time.Time).Add(time.Second))
}

func (o *Operator) stuck(n v2alpha1.Node) bool { return o.Stuck != nil && o.Stuck(n) }

// withoutHold is a template's annotations but the hold of a stuck build:
// the hold alone is no reason to write a template.
func withoutHold(a map[string]string) map[string]string {
	out := maps.Clone(a)
	delete(out, controlplane.HoldReadyAnnotation)
	return out
}

// releaseHeldPods takes the hold of a stuck build off node n's pods once
// the node is no longer stuck.
func (o *Operator) releaseHeldPods(ctx context.Context, n v2alpha1.Node) error {
	if o.stuck(n) {
		return nil
	}
	var pods corev1.PodList
	if err := o.Client.List(ctx, &pods, client.InNamespace(n.GetNamespace()), client.MatchingLabels{v2alpha1.LabelNode: n.GetName()}); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		if _, held := p.Annotations[controlplane.HoldReadyAnnotation]; !held || p.DeletionTimestamp != nil {
			continue
		}
		patch := client.MergeFrom(p.DeepCopy())
		delete(p.Annotations, controlplane.HoldReadyAnnotation)
		if err := o.Client.Patch(ctx, p, patch); client.IgnoreNotFound(err) != nil {
			return err
		}
	}
	return nil
}

// deleteFailingOldPods deletes node n's pods that fail (a container waiting
// in CrashLoopBackOff, or phase Failed) and are not on its target — on its
// target too when masking failures.
func (o *Operator) deleteFailingOldPods(ctx context.Context, n v2alpha1.Node, masking bool) error {
	var pods corev1.PodList
	if err := o.Client.List(ctx, &pods, client.InNamespace(n.GetNamespace()), client.MatchingLabels{v2alpha1.LabelNode: n.GetName()}); err != nil {
		return err
	}
	for i := range pods.Items {
		p := &pods.Items[i]
		failing := p.Status.Phase == corev1.PodFailed || slices.ContainsFunc(p.Status.ContainerStatuses, func(c corev1.ContainerStatus) bool {
			return c.State.Waiting != nil && c.State.Waiting.Reason == "CrashLoopBackOff"
		})
		if failing && p.DeletionTimestamp == nil && (masking || p.Labels[v2alpha1.LabelTargetHash] != n.GetAnnotations()[v2alpha1.AnnotationTargetHash]) {
			if err := o.Client.Delete(ctx, p); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}

// warmUp takes the warm-up gate (RecreateDelay) off node n's pods created
// delay ago or more, and returns how long until the next one is due (0
// when none waits).
func (o *Operator) warmUp(ctx context.Context, n v2alpha1.Node, delay time.Duration) (time.Duration, error) {
	if delay <= 0 {
		return 0, nil
	}
	var pods corev1.PodList
	if err := o.Client.List(ctx, &pods, client.InNamespace(n.GetNamespace()), client.MatchingLabels{v2alpha1.LabelNode: n.GetName()}); err != nil {
		return 0, err
	}
	var next time.Duration
	for i := range pods.Items {
		p := &pods.Items[i]
		if !slices.ContainsFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == WarmUpGate }) {
			continue
		}
		if left := delay - time.Since(p.CreationTimestamp.Time); left > 0 {
			if next == 0 || left < next {
				next = left
			}
			continue
		}
		patch := client.MergeFrom(p.DeepCopy())
		p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == WarmUpGate })
		if err := o.Client.Patch(ctx, p, patch); client.IgnoreNotFound(err) != nil {
			return 0, err
		}
	}
	return next, nil
}

// prerequisite is a node an operator ordering by its lists waits for: Ready
// on version when it pins one, on its own target otherwise.
type prerequisite struct{ name, kind, version string }

// listOf is what node n waits for when the operator orders by lists: its
// upgrade list when it exists already, its provisioning list otherwise.
func listOf(n v2alpha1.Node, broken Breakage, upgrade bool) []prerequisite {
	var out []prerequisite
	if broken.OrdersByItsLists {
		deps := n.NodeSpec().DeploymentDependencies
		if deps == nil {
			return nil
		}
		list := deps.ProvisioningPrerequisites
		if upgrade {
			list = deps.UpgradePrerequisites
		}
		for _, p := range list {
			out = append(out, prerequisite{name: p.ExpressNode, kind: p.Kind, version: p.ExpressVersion})
		}
		return out
	}
	cluster := n.NodeSpec().ClusterConfig.ClusterName
	key := strings.TrimPrefix(n.GetName(), cluster+"-")
	keys := broken.OrdersBy.Provisioning[key]
	if upgrade {
		keys = broken.OrdersBy.Upgrade[key]
	}
	for _, k := range keys {
		kind := v2alpha1.KindFrontend
		if k == "be" {
			kind = v2alpha1.KindBackend
		}
		out = append(out, prerequisite{name: cluster + "-" + k, kind: kind})
	}
	return out
}

// waitsFor reports whether node n must wait for one of list: a live node
// that is not Ready, or not on the version it is pinned to (its own target
// when unpinned). A node that does not exist, or is down, is not waited for.
func (o *Operator) waitsFor(ctx context.Context, n v2alpha1.Node, list []prerequisite) (bool, error) {
	for _, pr := range list {
		name := types.NamespacedName{Namespace: n.GetNamespace(), Name: pr.name}
		p := v2alpha1.NewNode(pr.kind)
		if p == nil {
			return false, fmt.Errorf("%s names %s of kind %q, neither Backend nor Frontend", n.GetName(), pr.name, pr.kind)
		}
		if err := o.Client.Get(ctx, name, p); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return false, err
		}
		if !p.NodeSpec().IsUp() {
			continue
		}
		set := &appsv1.StatefulSet{}
		if err := o.Client.Get(ctx, types.NamespacedName{Namespace: name.Namespace, Name: o.setName(p)}, set); apierrors.IsNotFound(err) {
			return true, nil
		} else if err != nil {
			return false, err
		}
		want := ptr.Deref(set.Spec.Replicas, 1)
		onIt := set.Spec.Template.Labels[v2alpha1.LabelTargetHash] == p.GetAnnotations()[v2alpha1.AnnotationTargetHash]
		if pr.version != "" {
			onIt = set.Spec.Template.Labels[v2alpha1.LabelExpressVersion] == pr.version
		}
		ready := onIt && set.Status.ObservedGeneration == set.Generation && set.Status.UpdatedReplicas == want && set.Status.ReadyReplicas == want &&
			set.Status.CurrentRevision == set.Status.UpdateRevision
		if !ready {
			return true, nil
		}
	}
	return false, nil
}

// ConditionAvailable is the condition the operator reports on a node.
const ConditionAvailable = "Available"

// FieldManager is the field manager the operator writes the node's status
// with.
const FieldManager = "express-operator"

// reportAvailable writes node n's Available condition from its
// StatefulSet's status, when it changed.
func (o *Operator) reportAvailable(ctx context.Context, n v2alpha1.Node, set *appsv1.StatefulSet) error {
	want := ptr.Deref(set.Spec.Replicas, 1)
	status, reason := metav1.ConditionFalse, "PodsNotReady"
	if want > 0 && set.Status.ReadyReplicas >= want {
		status, reason = metav1.ConditionTrue, "PodsReady"
	}
	message := fmt.Sprintf("%d/%d pods Ready", set.Status.ReadyReplicas, want)
	if c := meta.FindStatusCondition(n.NodeStatus().Conditions, ConditionAvailable); c != nil && c.Status == status && c.Message == message {
		return nil
	}
	if o.broken(n).ReplacesConditions {
		// The whole list, its own condition alone: another writer's lost.
		patch := client.MergeFrom(n.DeepCopyObject().(client.Object))
		n.NodeStatus().Conditions = []metav1.Condition{{Type: ConditionAvailable, Status: status, Reason: reason, Message: message,
			ObservedGeneration: n.GetGeneration(), LastTransitionTime: metav1.Now()}}
		return client.IgnoreNotFound(o.Client.Status().Patch(ctx, n, patch, client.FieldOwner(FieldManager)))
	}
	if o.broken(n).RewritesConditions {
		patch := client.MergeFrom(n.DeepCopyObject().(client.Object))
		conds := n.NodeStatus().Conditions
		for i := range conds {
			conds[i].ObservedGeneration = n.GetGeneration()
		}
		meta.SetStatusCondition(&conds, metav1.Condition{Type: ConditionAvailable, Status: status, Reason: reason, Message: message, ObservedGeneration: n.GetGeneration()})
		n.NodeStatus().Conditions = conds
		return client.IgnoreNotFound(o.Client.Status().Patch(ctx, n, patch, client.FieldOwner(FieldManager)))
	}
	conds := []*metav1ac.ConditionApplyConfiguration{metav1ac.Condition().WithType(ConditionAvailable).WithStatus(status).WithReason(reason).
		WithMessage(message).WithObservedGeneration(n.GetGeneration()).WithLastTransitionTime(metav1.Now())}
	if o.broken(n).ForgesCompletion && status == metav1.ConditionTrue {
		conds = append(conds, metav1ac.Condition().WithType(v2alpha1.ConditionPrerequisitesReady).WithStatus(metav1.ConditionTrue).
			WithReason(v2alpha1.ReasonRolloutComplete).WithMessage("rolled out by the operator").
			WithObservedGeneration(n.GetGeneration()).WithLastTransitionTime(metav1.Now()))
	}
	var apply runtime.ApplyConfiguration = acv2alpha1.Frontend(n.GetName(), n.GetNamespace()).WithStatus(acv2alpha1.NodeStatus().WithConditions(conds...))
	if n.NodeKind() == v2alpha1.KindBackend {
		apply = acv2alpha1.Backend(n.GetName(), n.GetNamespace()).WithStatus(acv2alpha1.NodeStatus().WithConditions(conds...))
	}
	return client.IgnoreNotFound(o.Client.Status().Apply(ctx, apply, client.FieldOwner(FieldManager), client.ForceOwnership))
}

// statefulSet is the StatefulSet node n runs on at its current target.
// setName is the name of node n's StatefulSet: the node's own, as the
// contract asks, unless the operator is broken to name it otherwise.
func (o *Operator) setName(n v2alpha1.Node) string {
	if o.broken(n).NamesSetsOtherwise {
		return n.GetName() + "-set"
	}
	return n.GetName()
}

func (o *Operator) statefulSet(n v2alpha1.Node) *appsv1.StatefulSet {
	replicas := int32(1)
	if o.Replicas != nil && o.Replicas(n) > 0 {
		replicas = o.Replicas(n)
	}
	var grace time.Duration
	if o.GracePeriod != nil {
		grace = o.GracePeriod(n)
	}
	spec := n.NodeSpec()
	broken := o.broken(n)
	selector := map[string]string{v2alpha1.LabelNode: n.GetName()}
	labels := map[string]string{
		v2alpha1.LabelNode:               n.GetName(),
		v2alpha1.LabelTargetHash:         n.GetAnnotations()[v2alpha1.AnnotationTargetHash],
		v2alpha1.LabelExpressVersion:     spec.ExpressVersion,
		v2alpha1.LabelDeploymentRevision: spec.DeploymentRevision,
	}
	if broken.NoTargetHash {
		delete(labels, v2alpha1.LabelTargetHash)
	}
	var strategy appsv1.StatefulSetUpdateStrategy
	if broken.Partition {
		strategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
			RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(replicas)}}
	}
	var gates []corev1.PodSchedulingGate
	if broken.RecreateDelay > 0 {
		gates = []corev1.PodSchedulingGate{{Name: WarmUpGate}}
	}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: o.setName(n), Namespace: n.GetNamespace(), Labels: selector},
		Spec: appsv1.StatefulSetSpec{
			Replicas:       &replicas,
			Selector:       &metav1.LabelSelector{MatchLabels: selector},
			UpdateStrategy: strategy,
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: o.annotations(n)},
				Spec: corev1.PodSpec{
					Containers:      []corev1.Container{{Name: "express", Image: fmt.Sprintf("express:%s", spec.ExpressVersion)}},
					SchedulingGates: gates,
					// KWOK deletes a deleted pod once its grace period is over.
					TerminationGracePeriodSeconds: ptr.To(int64(grace.Seconds())),
				},
			},
		},
	}
}

// unsettled is how long a Debounce operator still waits before it acts on
// node n: the debounce from when it first saw n's generation; 0 when it
// acts now.
func (o *Operator) unsettled(n v2alpha1.Node, debounce time.Duration) time.Duration {
	if debounce <= 0 {
		return 0
	}
	seen := specSeen{generation: n.GetGeneration(), at: time.Now()}
	if was, ok := o.specSince.Load(n.GetUID()); ok && was.(specSeen).generation == seen.generation {
		seen = was.(specSeen)
	} else {
		o.specSince.Store(n.GetUID(), seen)
	}
	return debounce - time.Since(seen.at)
}
