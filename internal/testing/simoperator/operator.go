// Package simoperator is a small simulated Express operator for tests, the
// demo and benchmarks. Like the real one it honours the rollout gate: while
// a node carries any gate it neither rolls it out nor re-provisions it.
// Otherwise it converges the node on any target change — replaces its pod
// with one labelled with the node's target hash (and its version and
// revision), marks it Ready after a delay, and deletes the pods of a node
// that is down or deleted. It also plays the scheduler and the kubelet: a
// pod with any scheduling gate never becomes Ready, and its delay starts
// when it becomes schedulable. It records the order in which nodes started
// rolling: the moment their new pod became schedulable.
package simoperator

import (
	"context"
	"fmt"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// Start is one rollout the operator started.
type Start struct {
	// Node is the node's name.
	Node string
	// Namespace is the node's namespace.
	Namespace string
	// Version is the version rolled to.
	Version string
	// Hash is the target hash of the pod; Pod its name.
	Hash, Pod string
	// Gated: the pod was created scheduling-gated and this is when the
	// gate went.
	Gated bool
	// At is when the rollout started.
	At time.Time
}

// Ready is one node becoming Ready on its target.
type Ready struct {
	Node, Namespace, Version string
	// Config is the node's configChangeset.
	Config string
	At     time.Time
}

// Operator is the simulated Express operator.
type Operator struct {
	// Client reads from the operator's own cache and writes to the API server.
	Client client.Client
	// ReadyAfter is how long a new pod takes to become Ready.
	ReadyAfter time.Duration
	// RecoverAfter is how long after a crash the operator re-provisions a
	// node (if it is not gated by then).
	RecoverAfter time.Duration
	// OnStart and OnReady, when set, are called as rollouts start and finish.
	OnStart func(Start)
	OnReady func(Ready)
	// OnUngated, when set, is called the moment the operator's informer
	// sees a node's last gate go, before any queueing.
	OnUngated func(namespace, node string, at time.Time)
	// StatefulSets: every pod is owned (controller owner reference) by a
	// StatefulSet of one replica named after its node, created with the
	// node's first pod, and named as its ordinal 0 (acme-fe1-0), as the
	// contract asks of the Express operator's pods (its naming rule, which
	// lets the sequencer read a release's workload by name). Nothing runs
	// the StatefulSet: the operator still creates the pods itself, each
	// once the one before it is gone (a pod with no machine is deleted at
	// once); it writes only the StatefulSet's observedGeneration, as its
	// controller would once it has acted on the spec.
	StatefulSets bool

	mu        sync.Mutex
	started   []Start
	readies   []Ready
	seq       int
	pending   map[types.NamespacedName]Start     // pod → its start, while scheduling-gated
	creating  map[types.NamespacedName]bool      // pods being created: their clock is not set yet
	readyAt   map[types.NamespacedName]time.Time // pod → when it becomes Ready
	crashedAt map[types.NamespacedName]time.Time // node → when it crashed
	stuck     map[types.NamespacedName]bool
	sets      map[types.NamespacedName]types.UID // node → its StatefulSet's UID
	// expected holds, per node, the pod it just created and the pods it
	// just deleted, until its cache shows both: acting on a cache that has
	// not seen its own writes would roll a node twice. By UID: a pod
	// created again under its StatefulSet ordinal's name is a new pod.
	expected map[types.NamespacedName]expectation
}

type expectation struct {
	created types.UID // "" until the pod is created
	deleted map[types.UID]bool
}

// nodeRef is the operator's work item: one node of either kind.
type nodeRef struct {
	Kind string
	types.NamespacedName
}

// SetupWithManager runs the operator on mgr.
func (o *Operator) SetupWithManager(mgr ctrl.Manager) error {
	o.readyAt, o.crashedAt, o.stuck = map[types.NamespacedName]time.Time{}, map[types.NamespacedName]time.Time{}, map[types.NamespacedName]bool{}
	o.sets = map[types.NamespacedName]types.UID{}
	o.expected = map[types.NamespacedName]expectation{}
	o.pending = map[types.NamespacedName]Start{}
	o.creating = map[types.NamespacedName]bool{}
	byKind := func(kind string) handler.TypedEventHandler[client.Object, nodeRef] {
		return handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []nodeRef {
			return []nodeRef{{Kind: kind, NamespacedName: client.ObjectKeyFromObject(obj)}}
		})
	}
	podNode := handler.TypedEnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []nodeRef {
		key := types.NamespacedName{Namespace: obj.GetNamespace(), Name: obj.GetLabels()[v2alpha1.LabelNode]}
		return []nodeRef{{Kind: v2alpha1.KindBackend, NamespacedName: key}, {Kind: v2alpha1.KindFrontend, NamespacedName: key}}
	})
	if o.OnUngated != nil {
		if err := WatchUngated(mgr, o.OnUngated); err != nil {
			return err
		}
	}
	return builder.TypedControllerManagedBy[nodeRef](mgr).
		Named("simulated-express-operator").
		Watches(&v2alpha1.Backend{}, byKind(v2alpha1.KindBackend)).
		Watches(&v2alpha1.Frontend{}, byKind(v2alpha1.KindFrontend)).
		Watches(&corev1.Pod{}, podNode).
		WithOptions(controller.TypedOptions[nodeRef]{MaxConcurrentReconciles: 8, SkipNameValidation: ptr.To(true)}).
		Complete(reconcile.TypedFunc[nodeRef](o.reconcile))
}

// Started returns the rollouts started so far, in order.
func (o *Operator) Started() []Start {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Start(nil), o.started...)
}

// Readies returns the pods the operator made Ready so far, in order.
func (o *Operator) Readies() []Ready {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]Ready(nil), o.readies...)
}

// StartedIn returns the names of the nodes started in a namespace, in order.
func (o *Operator) StartedIn(namespace string) []string {
	var out []string
	for _, s := range o.Started() {
		if s.Namespace == namespace {
			out = append(out, s.Node)
		}
	}
	return out
}

// Crash turns every pod of the node not Ready with its containers waiting
// in CrashLoopBackOff, as the kubelet reports a crash loop; the operator
// re-provisions it RecoverAfter later unless it is gated then.
func (o *Operator) Crash(ctx context.Context, c client.Client, namespace, node string) error {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{v2alpha1.LabelNode: node}); err != nil {
		return err
	}
	o.mu.Lock()
	o.crashedAt[types.NamespacedName{Namespace: namespace, Name: node}] = time.Now()
	o.mu.Unlock()
	for i := range pods.Items {
		p := &pods.Items[i]
		p.Status.ContainerStatuses = nil
		for _, ctr := range p.Spec.Containers {
			p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{
				Name: ctr.Name, Image: ctr.Image, RestartCount: 3,
				State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off restarting failed container"}},
			})
		}
		if err := setReady(ctx, c, p, corev1.ConditionFalse); err != nil {
			return err
		}
	}
	return nil
}

// Stick makes the node's next pods never become Ready, for stalled rollouts.
func (o *Operator) Stick(namespace, node string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stuck[types.NamespacedName{Namespace: namespace, Name: node}] = true
}

// Unstick lets the node's pods become Ready again.
func (o *Operator) Unstick(namespace, node string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	delete(o.stuck, types.NamespacedName{Namespace: namespace, Name: node})
}

func (o *Operator) reconcile(ctx context.Context, ref nodeRef) (reconcile.Result, error) {
	// The node first: a pod event enqueues both kinds, and only the kind
	// that exists may look at (and consume) the node's expectations —
	// otherwise the other kind's reconcile could consume them while this one
	// holds a pod list from before them, and roll the node twice.
	n := v2alpha1.NewNode(ref.Kind)
	var pods corev1.PodList
	if err := o.Client.Get(ctx, ref.NamespacedName, n); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		// A deleted node takes its pods with it; the pod watch asks for
		// both kinds, so only delete when neither kind exists.
		other := v2alpha1.NewNode(map[string]string{v2alpha1.KindBackend: v2alpha1.KindFrontend, v2alpha1.KindFrontend: v2alpha1.KindBackend}[ref.Kind])
		if err := o.Client.Get(ctx, ref.NamespacedName, other); !apierrors.IsNotFound(err) {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		if err := o.Client.List(ctx, &pods, client.InNamespace(ref.Namespace), client.MatchingLabels{v2alpha1.LabelNode: ref.Name}); err != nil {
			return reconcile.Result{}, err
		}
		return reconcile.Result{}, o.deletePods(ctx, pods.Items)
	}
	if err := o.Client.List(ctx, &pods, client.InNamespace(ref.Namespace), client.MatchingLabels{v2alpha1.LabelNode: ref.Name}); err != nil {
		return reconcile.Result{}, err
	}
	if !o.seen(ref.NamespacedName, pods.Items) {
		return reconcile.Result{RequeueAfter: 20 * time.Millisecond}, nil
	}
	spec := n.NodeSpec()
	if !spec.IsUp() {
		return reconcile.Result{}, o.deletePods(ctx, pods.Items)
	}
	if v2alpha1.IsGated(n) || n.GetDeletionTimestamp() != nil {
		// The contract: no rollout, no re-provisioning while gated; pods
		// that exist still start (the kubelet does not ask the operator).
		return o.markReady(ctx, n, pods.Items)
	}
	hash := n.GetAnnotations()[v2alpha1.AnnotationTargetHash]
	onTarget := len(pods.Items) > 0
	for _, p := range pods.Items {
		onTarget = onTarget && p.DeletionTimestamp == nil && p.Labels[v2alpha1.LabelTargetHash] == hash &&
			p.Labels[v2alpha1.LabelExpressVersion] == spec.ExpressVersion && p.Labels[v2alpha1.LabelDeploymentRevision] == spec.DeploymentRevision
	}
	o.mu.Lock()
	crashedAt, crashed := o.crashedAt[ref.NamespacedName]
	o.mu.Unlock()
	if crashed {
		if wait := o.RecoverAfter - time.Since(crashedAt); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		onTarget = false // re-provision
	}
	if !onTarget {
		return o.roll(ctx, n, pods.Items)
	}
	return o.markReady(ctx, n, pods.Items)
}

// seen reports whether the cache shows the operator's last writes for the
// node, and forgets them once it does.
func (o *Operator) seen(node types.NamespacedName, pods []corev1.Pod) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	e, ok := o.expected[node]
	if !ok {
		return true
	}
	created := false
	for _, p := range pods {
		if e.deleted[p.UID] {
			return false
		}
		created = created || e.created != "" && p.UID == e.created
	}
	if created {
		delete(o.expected, node)
	}
	return created
}

// roll replaces the node's pods with one pod on its target: labelled with
// the node's target hash, as the contract asks of the Express operator.
func (o *Operator) roll(ctx context.Context, n v2alpha1.Node, old []corev1.Pod) (reconcile.Result, error) {
	if err := o.deletePods(ctx, old); err != nil {
		return reconcile.Result{}, err
	}
	spec := n.NodeSpec()
	key := client.ObjectKeyFromObject(n)
	pod := o.newPod(n.GetName(), n.GetNamespace(), map[string]string{
		v2alpha1.LabelNode: n.GetName(), v2alpha1.LabelExpressVersion: spec.ExpressVersion,
		v2alpha1.LabelDeploymentRevision: spec.DeploymentRevision,
		v2alpha1.LabelTargetHash:         n.GetAnnotations()[v2alpha1.AnnotationTargetHash],
	})
	if o.StatefulSets {
		ref, err := o.statefulSet(ctx, key)
		if err != nil {
			return reconcile.Result{}, err
		}
		pod.OwnerReferences = []metav1.OwnerReference{ref}
	}
	if err := o.create(ctx, o.Client, pod); err != nil {
		return reconcile.Result{}, fmt.Errorf("creating a pod for %s: %w", n.GetName(), err)
	}
	deleted := map[types.UID]bool{}
	for _, p := range old {
		deleted[p.UID] = true
	}
	o.mu.Lock()
	o.expected[key] = expectation{created: pod.UID, deleted: deleted}
	delete(o.crashedAt, key)
	o.mu.Unlock()
	return reconcile.Result{RequeueAfter: o.ReadyAfter}, nil
}

// statefulSet returns the controller owner reference to the node's
// StatefulSet, creating it (one replica) if it does not exist yet.
func (o *Operator) statefulSet(ctx context.Context, node types.NamespacedName) (metav1.OwnerReference, error) {
	o.mu.Lock()
	uid, ok := o.sets[node]
	o.mu.Unlock()
	if !ok {
		labels := map[string]string{v2alpha1.LabelNode: node.Name}
		sts := &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: node.Name, Namespace: node.Namespace},
			Spec: appsv1.StatefulSetSpec{
				Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "express", Image: "express"}}},
				},
			},
		}
		err := o.Client.Create(ctx, sts)
		if err == nil {
			// As a StatefulSet controller that has acted on its spec: its
			// status says so (a read by name trusts no StatefulSet whose
			// controller has not, and reads the tenant whole).
			sts.Status.ObservedGeneration = sts.Generation
			err = o.Client.Status().Update(ctx, sts)
		}
		if apierrors.IsAlreadyExists(err) {
			err = o.Client.Get(ctx, node, sts)
		}
		if err != nil {
			return metav1.OwnerReference{}, fmt.Errorf("creating the StatefulSet of %s: %w", node, err)
		}
		uid = sts.UID
		o.mu.Lock()
		o.sets[node] = uid
		o.mu.Unlock()
	}
	return metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: node.Name, UID: uid, Controller: ptr.To(true)}, nil
}

// newPod returns a new pod of a node: named as its StatefulSet's ordinal 0
// with StatefulSets, otherwise with a name never used before (a recreated
// pod is a new pod, as a ReplicaSet's are).
func (o *Operator) newPod(node, namespace string, labels map[string]string) *corev1.Pod {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.newPodLocked(node, namespace, labels)
}

func (o *Operator) newPodLocked(node, namespace string, labels map[string]string) *corev1.Pod {
	name := node + "-0"
	if !o.StatefulSets {
		o.seq++
		name = fmt.Sprintf("%s-%d-%d", node, time.Now().UnixMilli()%100000, o.seq)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "express", Image: "express:" + labels[v2alpha1.LabelExpressVersion]}}},
	}
}

// create creates the pod through the API server (and so through the pod
// admission webhook) and starts its clock if it is schedulable; a
// scheduling-gated pod starts when its gates go (markReady).
func (o *Operator) create(ctx context.Context, c client.Client, pod *corev1.Pod) error {
	key := client.ObjectKeyFromObject(pod)
	o.mu.Lock()
	o.creating[key] = true
	o.mu.Unlock()
	defer func() {
		o.mu.Lock()
		delete(o.creating, key)
		o.mu.Unlock()
	}()
	if err := c.Create(ctx, pod); err != nil {
		return err
	}
	start := Start{Node: pod.Labels[v2alpha1.LabelNode], Namespace: pod.Namespace, Version: pod.Labels[v2alpha1.LabelExpressVersion],
		Hash: pod.Labels[v2alpha1.LabelTargetHash], Pod: pod.Name, At: time.Now()}
	o.mu.Lock()
	if len(pod.Spec.SchedulingGates) > 0 {
		start.Gated = true
		o.pending[client.ObjectKeyFromObject(pod)] = start
		o.mu.Unlock()
		return nil
	}
	o.mu.Unlock()
	o.schedulable(client.ObjectKeyFromObject(pod), start)
	return nil
}

// schedulable records that a pod may run: its node started, its Ready
// delay runs from now.
func (o *Operator) schedulable(pod types.NamespacedName, start Start) {
	o.mu.Lock()
	o.readyAt[pod] = start.At.Add(o.ReadyAfter)
	o.started = append(o.started, start)
	o.mu.Unlock()
	if o.OnStart != nil {
		o.OnStart(start)
	}
}

// Evict deletes every pod of the nodes in the same instant and then at once
// creates their replacements with the same labels, as StatefulSets do after
// a node failure: no delay, and no question asked of the operator. The
// replacements go through the pod admission webhook.
func (o *Operator) Evict(ctx context.Context, c client.Client, namespace string, nodes ...string) error {
	old := map[string][]corev1.Pod{}
	for _, node := range nodes {
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{v2alpha1.LabelNode: node}); err != nil {
			return err
		}
		old[node] = pods.Items
	}
	replacements := map[string][]*corev1.Pod{}
	o.mu.Lock()
	for _, node := range nodes {
		deleted := map[types.UID]bool{}
		for _, p := range old[node] {
			deleted[p.UID] = true
		}
		for _, p := range old[node] {
			replacement := o.newPodLocked(node, namespace, p.Labels)
			replacement.OwnerReferences = p.OwnerReferences
			replacements[node] = append(replacements[node], replacement)
		}
		if len(replacements[node]) > 0 {
			// The operator waits until its cache shows the swap, as it does
			// for its own rolls: it must not roll the node meanwhile.
			o.expected[types.NamespacedName{Namespace: namespace, Name: node}] = expectation{deleted: deleted}
		}
	}
	o.mu.Unlock()
	for _, node := range nodes {
		if err := o.deletePodsWith(ctx, c, old[node]); err != nil {
			return err
		}
	}
	for _, node := range nodes {
		for _, p := range replacements[node] {
			if err := o.create(ctx, c, p); err != nil {
				return fmt.Errorf("recreating a pod of %s: %w", node, err)
			}
		}
		if n := len(replacements[node]); n > 0 {
			key := types.NamespacedName{Namespace: namespace, Name: node}
			o.mu.Lock()
			o.expected[key] = expectation{created: replacements[node][n-1].UID, deleted: o.expected[key].deleted}
			o.mu.Unlock()
		}
	}
	return nil
}

// markReady turns the node's pods Ready once their delay has passed; a pod
// with scheduling gates is not placed, so it never becomes Ready.
func (o *Operator) markReady(ctx context.Context, n v2alpha1.Node, pods []corev1.Pod) (reconcile.Result, error) {
	o.mu.Lock()
	stuck := o.stuck[client.ObjectKeyFromObject(n)]
	o.mu.Unlock()
	for i := range pods {
		p := &pods[i]
		if podReady(p) || stuck || len(p.Spec.SchedulingGates) > 0 || p.DeletionTimestamp != nil {
			continue
		}
		o.mu.Lock()
		start, wasGated := o.pending[client.ObjectKeyFromObject(p)]
		delete(o.pending, client.ObjectKeyFromObject(p))
		o.mu.Unlock()
		if wasGated {
			start.At = time.Now()
			o.schedulable(client.ObjectKeyFromObject(p), start)
		}
		o.mu.Lock()
		at, ours := o.readyAt[client.ObjectKeyFromObject(p)]
		creating := o.creating[client.ObjectKeyFromObject(p)]
		o.mu.Unlock()
		if creating {
			return reconcile.Result{RequeueAfter: 20 * time.Millisecond}, nil // its clock starts in a moment
		}
		if !ours {
			continue // not started by this operator: leave it be
		}
		if wait := time.Until(at); wait > 0 {
			return reconcile.Result{RequeueAfter: wait}, nil
		}
		// Timed before the write: whoever sees the pod Ready sees it later.
		ready := Ready{Node: n.GetName(), Namespace: n.GetNamespace(), Version: n.NodeSpec().ExpressVersion, Config: n.NodeSpec().ConfigChangeset, At: time.Now()}
		if err := setReady(ctx, o.Client, p, corev1.ConditionTrue); err != nil {
			return reconcile.Result{}, err
		}
		o.mu.Lock()
		delete(o.readyAt, client.ObjectKeyFromObject(p))
		o.readies = append(o.readies, ready)
		o.mu.Unlock()
		if o.OnReady != nil {
			o.OnReady(ready)
		}
	}
	return reconcile.Result{}, nil
}

func (o *Operator) deletePods(ctx context.Context, pods []corev1.Pod) error {
	return o.deletePodsWith(ctx, o.Client, pods)
}

func (o *Operator) deletePodsWith(ctx context.Context, c client.Client, pods []corev1.Pod) error {
	for i := range pods {
		// By UID: under its name there may be a new pod already, created
		// again as its StatefulSet's ordinal (a conflict: leave it be).
		err := c.Delete(ctx, &pods[i], client.Preconditions{UID: &pods[i].UID})
		if apierrors.IsConflict(err) {
			continue
		}
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting pod %s: %w", pods[i].Name, err)
		}
		// What the operator kept of the pod goes with it: a pod created
		// again under its name starts afresh.
		key := client.ObjectKeyFromObject(&pods[i])
		o.mu.Lock()
		delete(o.pending, key)
		delete(o.readyAt, key)
		o.mu.Unlock()
	}
	return nil
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func setReady(ctx context.Context, c client.Client, p *corev1.Pod, status corev1.ConditionStatus) error {
	now := metav1.Now()
	p.Status.Conditions = []corev1.PodCondition{
		{Type: corev1.PodReady, Status: status, LastTransitionTime: now},
		{Type: corev1.ContainersReady, Status: status, LastTransitionTime: now},
	}
	if err := c.Status().Update(ctx, p); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("setting pod %s Ready=%s: %w", p.Name, status, err)
	}
	return nil
}

// State describes what the operator is waiting for in a namespace, for test
// failure messages.
func (o *Operator) State(ns string) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	out := ""
	add := func(what string, key types.NamespacedName, v any) {
		if key.Namespace == ns {
			out += fmt.Sprintf("%s %s: %+v\n", what, key.Name, v)
		}
	}
	for k, v := range o.expected {
		add("expected", k, v)
	}
	for k, v := range o.readyAt {
		add("readyAt", k, v)
	}
	for k, v := range o.pending {
		add("pending", k, v)
	}
	for k, v := range o.crashedAt {
		add("crashed", k, v)
	}
	return out
}

// WatchUngated calls ungated the moment mgr's informer sees a node's gate
// go, before any queueing: the benchmark's measure of a release.
func WatchUngated(mgr ctrl.Manager, ungated func(namespace, node string, at time.Time)) error {
	for _, obj := range []client.Object{&v2alpha1.Backend{}, &v2alpha1.Frontend{}} {
		inf, err := mgr.GetCache().GetInformer(context.Background(), obj)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{UpdateFunc: func(oldObj, newObj any) {
			old, cur := oldObj.(v2alpha1.Node), newObj.(v2alpha1.Node)
			if v2alpha1.IsGated(old) && !v2alpha1.IsGated(cur) {
				ungated(cur.GetNamespace(), cur.GetName(), time.Now())
			}
		}}); err != nil {
			return err
		}
	}
	return nil
}
