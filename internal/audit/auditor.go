package audit

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// Auditor watches Express nodes, their pods and StatefulSets, feeds the
// Judge in the order the API server stored them, and reports what it
// finds: a metric, a Warning Event on the node and its OrderKept
// condition. It holds, gates and releases nothing.
type Auditor struct {
	// Config reaches the API server.
	Config *rest.Config
	// Conditions writes the OrderKept condition.
	Conditions ConditionWriter
	// Recorder records the Warning Events.
	Recorder events.EventRecorder
	// DefaultMode is the mode of a namespace without the sequencing label.
	DefaultMode string
	// ConfirmAfter is how long a pod creation may wait for the watches of
	// its node and StatefulSets to reach its revision before the auditor
	// reads them fresh, by name, to learn they did not change.
	ConfirmAfter time.Duration
	// WouldHoldGrace: in audit, a target that started less than this
	// before the plan let its node go is not reported (Judge.Grace).
	WouldHoldGrace time.Duration
	// Clock times the waits.
	Clock clock.WithTicker
	Log   logr.Logger

	mu    sync.Mutex
	judge *Judge
	kinds map[NodeKey]string
	// setRVs are the revisions of the StatefulSets of each node as last
	// seen, and confirmed what fresh reads proved known, per node.
	setRVs                    map[NodeKey]map[string]uint64
	confirmedNode, confirmSet map[NodeKey]uint64
	waitingSince              map[NodeKey]time.Time
	// handled is, per stream (a node kind, streamSets, streamPods), the
	// revision of the last event its handler has processed: a watch's own
	// progress (LastSyncResourceVersion) runs ahead of its handlers.
	handled map[string]uint64
	// listedOnce are the streams whose first list is done: a later list
	// mends a broken watch (relistWatcher). listRV is each stream's last
	// list's revision: an object a list found gone (a tombstone) was
	// deleted before it.
	listedOnce map[string]bool
	listRV     map[string]uint64
	// informers are the streams' informers, by stream.
	informers map[string]toolscache.SharedIndexInformer

	nodeInformers map[string]toolscache.SharedIndexInformer
	podInformer   toolscache.SharedIndexInformer
	// fed: whether the node and pod handlers have been fed their
	// informer's first list.
	fed         []toolscache.InformerSynced
	setInformer toolscache.SharedIndexInformer
	nsInformer  toolscache.SharedIndexInformer
	dyn         dynamic.Interface
	cs          kubernetes.Interface
}

// ConditionWriter writes a node's OrderKept condition.
type ConditionWriter interface {
	WriteOrderKept(ctx context.Context, f Finding, message string) error
}

// NodeResources are the API resources of the two node kinds.
var NodeResources = map[string]schema.GroupVersionResource{
	v2alpha1.KindBackend:  v2alpha1.GroupVersion.WithResource("backends"),
	v2alpha1.KindFrontend: v2alpha1.GroupVersion.WithResource("frontends"),
}

// NeedLeaderElection: one auditor per installation, the elected replica's,
// so that a finding is counted and said once.
func (a *Auditor) NeedLeaderElection() bool { return true }

// Start watches until ctx ends.
func (a *Auditor) Start(ctx context.Context) error {
	var err error
	if a.cs, err = kubernetes.NewForConfig(a.Config); err != nil {
		return fmt.Errorf("creating the auditor's client: %w", err)
	}
	if a.dyn, err = dynamic.NewForConfig(a.Config); err != nil {
		return fmt.Errorf("creating the auditor's client: %w", err)
	}
	a.judge = NewJudge()
	a.judge.Grace = a.WouldHoldGrace
	a.kinds, a.setRVs = map[NodeKey]string{}, map[NodeKey]map[string]uint64{}
	a.confirmedNode, a.confirmSet, a.waitingSince = map[NodeKey]uint64{}, map[NodeKey]uint64{}, map[NodeKey]time.Time{}
	a.handled, a.listedOnce, a.listRV = map[string]uint64{}, map[string]bool{}, map[string]uint64{}
	a.makeInformers()
	a.fed = nil
	if err := a.wire(a.podInformer); err != nil {
		return err
	}
	// Namespaces first: a node's mode is read off them as its events come.
	for _, group := range [][]string{{streamNamespaces, streamSets}, {streamPods, v2alpha1.KindBackend, v2alpha1.KindFrontend}} {
		synced := make([]toolscache.InformerSynced, 0, len(group))
		for _, stream := range group {
			go a.informers[stream].RunWithContext(ctx)
			synced = append(synced, a.informers[stream].HasSynced)
		}
		if !toolscache.WaitForCacheSync(ctx.Done(), synced...) {
			return fmt.Errorf("the auditor's watches of %v did not sync", group)
		}
	}
	// An informer synced has its cache filled; its handlers may still be
	// fed the first list's objects. The holds under way are read off the
	// judge once the node and pod handlers have had every one.
	if !toolscache.WaitForCacheSync(ctx.Done(), a.fed...) {
		return fmt.Errorf("the auditor's handlers of nodes and pods were not fed their first lists")
	}
	a.mu.Lock()
	a.judge.FoundUnderWay()
	a.mu.Unlock()
	a.Log.Info("Auditing rollouts", "default mode", a.DefaultMode)
	tick := a.Clock.NewTicker(settleEvery)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C():
			a.settle(ctx)
		}
	}
}

// makeInformers makes the informers of the auditor's streams, each listing
// and watching through a relistWatcher.
func (a *Auditor) makeInformers() {
	opts := func(o metav1.ListOptions, labelSelector string) metav1.ListOptions {
		o.LabelSelector = labelSelector
		return o
	}
	make1 := func(stream string, example runtime.Object, list func(context.Context, metav1.ListOptions) (runtime.Object, error),
		watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error)) toolscache.SharedIndexInformer {
		inf := toolscache.NewSharedIndexInformer(newRelistWatcher(stream, list, watchFn, a.listed), example, 0, toolscache.Indexers{})
		a.informers[stream] = inf
		return inf
	}
	a.informers = map[string]toolscache.SharedIndexInformer{}
	pods := a.cs.CoreV1().Pods(metav1.NamespaceAll)
	a.podInformer = make1(streamPods, &corev1.Pod{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return pods.List(ctx, opts(o, v2alpha1.LabelNode))
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, opts(o, v2alpha1.LabelNode))
		})
	sets := a.cs.AppsV1().StatefulSets(metav1.NamespaceAll)
	a.setInformer = make1(streamSets, &appsv1.StatefulSet{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return sets.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return sets.Watch(ctx, o) })
	namespaces := a.cs.CoreV1().Namespaces()
	a.nsInformer = make1(streamNamespaces, &corev1.Namespace{},
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return namespaces.List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return namespaces.Watch(ctx, o)
		})
	a.nodeInformers = map[string]toolscache.SharedIndexInformer{}
	for kind, gvr := range NodeResources {
		nodes := a.dyn.Resource(gvr).Namespace(metav1.NamespaceAll)
		a.nodeInformers[kind] = make1(kind, &unstructured.Unstructured{},
			func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return nodes.List(ctx, o) },
			func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return nodes.Watch(ctx, o) })
	}
}

// settleEvery is how often the auditor judges what its watches delivered.
const settleEvery = 200 * time.Millisecond

// wire transforms what the watches keep to what the auditor reads, and
// feeds their events to the judge.
func (a *Auditor) wire(podInformer toolscache.SharedIndexInformer) error {
	for _, set := range []struct {
		inf       toolscache.SharedIndexInformer
		transform toolscache.TransformFunc
	}{{podInformer, stripPod}, {a.setInformer, stripSet}, {a.nsInformer, stripNamespace}} {
		if err := set.inf.SetTransform(set.transform); err != nil {
			return err
		}
	}
	for kind, inf := range a.nodeInformers {
		if err := inf.SetTransform(stripNode(kind)); err != nil {
			return err
		}
		h, err := inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
			AddFunc:    func(o any, _ bool) { a.onNode(kind, o, false) },
			UpdateFunc: func(_, o any) { a.onNode(kind, o, false) },
			DeleteFunc: func(o any) { a.onNode(kind, o, true) },
		})
		if err != nil {
			return err
		}
		a.fed = append(a.fed, h.HasSynced)
	}
	h, err := podInformer.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    a.onPodAdded,
		UpdateFunc: a.onPodUpdated,
		DeleteFunc: func(o any) { a.onPodDeleted(o, podInformer) },
	})
	if err != nil {
		return err
	}
	a.fed = append(a.fed, h.HasSynced)
	_, err = a.setInformer.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    func(o any, initial bool) { a.onSet(o, initial, false) },
		UpdateFunc: func(_, o any) { a.onSet(o, false, false) },
		DeleteFunc: func(o any) { a.onSet(o, false, true) },
	})
	return err
}

// Streams of events besides the node kinds.
const (
	streamPods       = "pods"
	streamSets       = "statefulsets"
	streamNamespaces = "namespaces"
)

// seen records that stream's handler processed an event at revision rv
// (not a tombstone's guess). Called locked.
func (a *Auditor) seen(stream string, rv uint64) {
	a.handled[stream] = max(a.handled[stream], rv)
}

// revision is an object's resource version as a number: etcd's revision,
// which orders every write of the cluster.
func revision(o metav1.Object) uint64 { return parseRevision(o.GetResourceVersion()) }

// parseRevision reads a resource version as a number (0 for none).
func parseRevision(rv string) uint64 {
	n, _ := strconv.ParseUint(rv, 10, 64)
	return n
}

// lastSync is the revision an informer's watch has delivered everything up to.
func lastSync(inf toolscache.SharedIndexInformer) uint64 {
	if inf == nil {
		return 0
	}
	return parseRevision(inf.LastSyncResourceVersion())
}

func unwrap(o any) any {
	if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return o
}

func (a *Auditor) onNode(kind string, o any, deleted bool) {
	_, tombstone := o.(toolscache.DeletedFinalStateUnknown)
	n, err := nodeOf(kind, unwrap(o))
	if err != nil {
		// Kept as it came (stripNode).
		name := "?"
		if m, isObject := unwrap(o).(metav1.Object); isObject {
			name = m.GetNamespace() + "/" + m.GetName()
		}
		a.Log.Error(err, "Not auditing a node that does not decode", "kind", kind, "node", name)
		return
	}
	k := NodeKey{Namespace: n.GetNamespace(), Name: n.GetName()}
	rv := revision(n)
	seen := a.nodeSeen(n)
	seen.Gone = deleted
	a.mu.Lock()
	defer a.mu.Unlock()
	if tombstone {
		rv = a.listRV[kind] // deleted before the list that found it gone
	} else {
		a.seen(kind, rv)
	}
	a.kinds[k] = kind
	a.judge.Node(rv, k, seen)
}

// nodeSeen reads what the order needs off a node.
func (a *Auditor) nodeSeen(n v2alpha1.Node) NodeSeen {
	ann := n.GetAnnotations()
	seen := NodeSeen{Kind: n.NodeKind(), UID: string(n.GetUID()), Target: ann[v2alpha1.AnnotationTargetHash], Audit: a.mode(n.GetNamespace()) == v2alpha1.ModeAudit}
	for _, c := range n.NodeStatus().Conditions {
		if c.Type == v2alpha1.ConditionPrerequisitesReady {
			seen.Waiting = c.Message
		}
	}
	seen.ReleasedAt, _ = time.Parse(time.RFC3339Nano, ann[v2alpha1.AnnotationReleasedAt])
	seen.Released = ann[v2alpha1.AnnotationReleasedTarget]
	seen.Key = SpecKey(n.NodeSpec().ExpressVersion, n.NodeSpec().DeploymentRevision)
	seen.Live = n.NodeSpec().IsUp() && n.GetDeletionTimestamp() == nil
	seen.Gated = n.NodeSpec().HasGate(v2alpha1.GateSequencer)
	seen.Held = seen.Gated ||
		seen.Audit && seen.Live && seen.Target != "" && ann[v2alpha1.AnnotationReleasedTarget] != seen.Target
	return seen
}

// mode is the sequencing mode of namespace ns, as the watch has it, read
// as the webhooks and the sequencer read it (v2alpha1.SequencingMode).
func (a *Auditor) mode(ns string) string {
	var labels map[string]string
	if o, ok, _ := a.nsInformer.GetStore().GetByKey(ns); ok {
		labels = o.(*corev1.Namespace).Labels
	}
	return v2alpha1.SequencingMode(labels, a.DefaultMode)
}

func (a *Auditor) onPodAdded(o any, initial bool) {
	p, ok := podOf(o)
	if !ok {
		return
	}
	rv := revision(p)
	stored := rv
	if !initial && !p.asCreated {
		unjudged.WithLabelValues(UnjudgedRelisted).Inc()
	}
	if initial {
		rv = 0 // before the auditor's view: it counts as running, and is not judged
	}
	seen := PodSeen{Node: NodeKey{Namespace: p.Namespace, Name: p.Labels[v2alpha1.LabelNode]}, Name: p.Name, UID: string(p.UID),
		Target: TargetKey(p.Labels), Created: p.CreationTimestamp.Time, WouldHold: p.Annotations[v2alpha1.AnnotationWouldHoldPod]}
	if c := metav1.GetControllerOf(p); c != nil && c.Kind == "StatefulSet" {
		seen.FromSet, seen.Set, seen.Revision = true, c.Name, p.Labels[appsv1.ControllerRevisionHashLabelKey]
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.seen(streamPods, stored)
	if !initial && !p.asCreated {
		// Seen first already changed — as a relist after a broken watch
		// shows it, or labelled into the watch's selector since: its
		// creation cannot be placed, and it is not judged. It runs in its
		// node from the revision it was seen at, not from before any hold
		// that began earlier (a pod labelled into a gated node is not what
		// the node ran when the gate was added).
		a.judge.PodMoved(stored, seen)
	} else {
		a.judge.PodCreated(rv, seen)
	}
	a.podLetGo(p)
}

// onPodUpdated records, of a pod enforcing would have held, the moment the
// plan would have let it go. A pod of another UID under the same name (a
// list after a broken watch shows it so) is the old one deleted and a new
// one seen first.
func (a *Auditor) onPodUpdated(old, o any) {
	p, ok := podOf(o)
	if !ok {
		return
	}
	was, wasPod := podOf(old)
	if wasPod && was.UID != p.UID {
		a.onPodDeleted(toolscache.DeletedFinalStateUnknown{Key: p.Namespace + "/" + p.Name, Obj: was}, a.podInformer)
		a.onPodAdded(p, false)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	rv := revision(p)
	a.seen(streamPods, rv)
	if wasPod && was.Labels[v2alpha1.LabelNode] != p.Labels[v2alpha1.LabelNode] {
		// Relabelled to another node: it leaves its old node now (a pod of
		// its name made there later is judged as any), and runs in the new
		// one from now on (what that node ran when a hold began before it
		// does not count it; it is not judged).
		a.judge.PodDeleted(rv, NodeKey{Namespace: was.Namespace, Name: was.Labels[v2alpha1.LabelNode]}, was.Name)
		a.judge.PodMoved(rv, PodSeen{Node: NodeKey{Namespace: p.Namespace, Name: p.Labels[v2alpha1.LabelNode]}, Name: p.Name, UID: string(p.UID),
			Target: TargetKey(p.Labels), Created: p.CreationTimestamp.Time})
	}
	a.podLetGo(p)
}

// podLetGo passes a pod's would-release-at to the judge. Called locked.
func (a *Auditor) podLetGo(p *keptPod) {
	if at, err := time.Parse(time.RFC3339Nano, p.Annotations[v2alpha1.AnnotationWouldReleaseAt]); err == nil {
		a.judge.PodLetGo(NodeKey{Namespace: p.Namespace, Name: p.Labels[v2alpha1.LabelNode]}, p.Name, string(p.UID), at)
	}
}

// asCreated reports whether a pod is as it was created: neither the
// scheduler nor a kubelet has written its status yet, so its resource
// version is its creation's (Pending, at most the SchedulingGated
// condition the API server adds). A watch delivers a new pod so; a relist after
// a broken watch may deliver it changed since.
func asCreated(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		// The API server itself marks a pod created with scheduling gates.
		if c.Type != corev1.PodScheduled || c.Reason != corev1.PodReasonSchedulingGated {
			return false
		}
	}
	return p.Status.StartTime == nil && p.Status.Phase != corev1.PodRunning
}

func (a *Auditor) onPodDeleted(o any, inf toolscache.SharedIndexInformer) {
	_, tombstone := o.(toolscache.DeletedFinalStateUnknown)
	p, ok := podOf(unwrap(o))
	if !ok {
		return
	}
	rv := revision(p)
	a.mu.Lock()
	defer a.mu.Unlock()
	if tombstone {
		rv = a.listRV[streamPods] // deleted before the list that found it gone
	} else {
		a.seen(streamPods, rv)
	}
	a.judge.PodDeleted(rv, NodeKey{Namespace: p.Namespace, Name: p.Labels[v2alpha1.LabelNode]}, p.Name)
}

func (a *Auditor) onSet(o any, initial, deleted bool) {
	_, tombstone := o.(toolscache.DeletedFinalStateUnknown)
	s, ok := setOf(unwrap(o))
	if !ok {
		return
	}
	name := nodeOfSet(metav1.GetControllerOfNoCopy(s), s.templateLabels)
	if name == "" {
		return
	}
	k := NodeKey{Namespace: s.Namespace, Name: name}
	rv := revision(s)
	a.mu.Lock()
	defer a.mu.Unlock()
	if tombstone {
		rv = a.listRV[streamSets] // deleted before the list that found it gone
	} else {
		a.seen(streamSets, rv)
	}
	if a.setRVs[k] == nil {
		a.setRVs[k] = map[string]uint64{}
	}
	if deleted {
		delete(a.setRVs[k], s.Name)
	} else {
		a.setRVs[k][s.Name] = revision(s)
	}
	at := rv
	if initial {
		at = 0
	}
	a.judge.Set(at, SetSeen{Node: k, Name: s.Name, Target: TargetKey(s.templateLabels),
		Current: s.current, Update: s.update, Unobserved: s.unobserved, Gone: deleted})
}

// nodeOfSet names the Express node a StatefulSet belongs to, by its
// controller and the labels of its pod template: the controller if it is a
// node, else the template's node label; "" for none.
func nodeOfSet(controller *metav1.OwnerReference, templateLabels map[string]string) string {
	if c := controller; c != nil && (c.Kind == v2alpha1.KindBackend || c.Kind == v2alpha1.KindFrontend) {
		return c.Name
	}
	return templateLabels[v2alpha1.LabelNode]
}

// known is the revision through which everything of node k and its
// StatefulSets is known: what the handlers of their watches processed, or
// what a fresh read proved unchanged.
func (a *Auditor) known(k NodeKey) uint64 {
	nodes := min(a.handled[v2alpha1.KindBackend], a.handled[v2alpha1.KindFrontend])
	if kind := a.kinds[k]; kind != "" {
		nodes = a.handled[kind]
	}
	return min(max(nodes, a.confirmedNode[k]), max(a.handled[streamSets], a.confirmSet[k]))
}

// settle judges what can be judged, reports it, and reads fresh the nodes
// whose pods wait longer than ConfirmAfter for their watches.
func (a *Auditor) settle(ctx context.Context) {
	a.mu.Lock()
	a.judge.PodsThrough = a.handled[streamPods]
	a.judge.CloseBlind(func(stream string) uint64 { return a.handled[stream] })
	blinded := a.judge.Blinded
	found := a.judge.Settle(a.known)
	unjudged.WithLabelValues(UnjudgedBlind).Add(float64(a.judge.Blinded - blinded))
	waiting := a.judge.Waiting(a.known)
	a.forgetGone(waiting)
	pendingPods.Set(float64(a.judge.Pending()))
	now := a.Clock.Now()
	var confirm []NodeKey
	for k := range a.waitingSince {
		if _, ok := waiting[k]; !ok {
			delete(a.waitingSince, k)
		}
	}
	for k := range waiting {
		since, ok := a.waitingSince[k]
		if !ok {
			a.waitingSince[k] = now
		} else if now.Sub(since) >= a.ConfirmAfter {
			confirm = append(confirm, k)
		}
	}
	a.mu.Unlock()
	for _, f := range found {
		a.report(ctx, f)
	}
	for _, k := range confirm {
		if err := a.confirm(ctx, k, waiting[k]); err != nil {
			a.Log.V(1).Info("Reading a node fresh to judge its pods", "node", k.String(), "error", err.Error())
		}
	}
}

// forgetGone forgets what the auditor keeps of nodes the judge forgot (gone)
// and no pod waits on: their kind, their fresh reads' revisions, and the
// revisions of StatefulSets of theirs no longer there. Called locked.
func (a *Auditor) forgetGone(waiting map[NodeKey]uint64) {
	for _, m := range []map[NodeKey]uint64{a.confirmedNode, a.confirmSet} {
		for k := range m {
			if _, ok := waiting[k]; !ok && !a.judge.Knows(k) {
				delete(m, k)
			}
		}
	}
	for k := range a.kinds {
		if _, ok := waiting[k]; !ok && !a.judge.Knows(k) {
			delete(a.kinds, k)
		}
	}
	for k, sets := range a.setRVs {
		if len(sets) == 0 {
			delete(a.setRVs, k)
		}
	}
}

// confirm reads node k and its namespace's StatefulSets fresh from the API
// server (a read issued after the pod's revision was delivered, so it sees
// at least that revision) and, where what it reads is what the watches last
// delivered, records k as known through rv.
func (a *Auditor) confirm(ctx context.Context, k NodeKey, rv uint64) error {
	freshReads.Inc()
	a.mu.Lock()
	kind := a.kinds[k]
	last, gone := a.judge.LastNode(k)
	a.mu.Unlock()
	nodeOK := false
kinds:
	for _, kd := range []string{v2alpha1.KindBackend, v2alpha1.KindFrontend} {
		if kind != "" && kd != kind {
			continue
		}
		u, err := a.dyn.Resource(NodeResources[kd]).Namespace(k.Namespace).Get(ctx, k.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			nodeOK = gone
			continue
		case err != nil:
			return err
		}
		nodeOK = revision(u) == last
		break kinds
	}
	sets, err := a.cs.AppsV1().StatefulSets(k.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if nodeOK {
		a.confirmedNode[k] = max(a.confirmedNode[k], rv)
	}
	have := map[string]uint64{}
	for i := range sets.Items {
		if s := &sets.Items[i]; nodeOfSet(metav1.GetControllerOfNoCopy(s), s.Spec.Template.Labels) == k.Name {
			have[sets.Items[i].Name] = revision(&sets.Items[i])
		}
	}
	if len(have) == len(a.setRVs[k]) {
		for name, r := range have {
			if a.setRVs[k][name] != r {
				return nil
			}
		}
		a.confirmSet[k] = max(a.confirmSet[k], rv)
	}
	return nil
}
