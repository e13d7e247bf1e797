package controlplane

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// ConfigAnnotation is where the Express operator's part (expressoperator)
// puts a node's configChangeset on its pods, for tests to tell a pod of a
// config change from one of the config before.
const ConfigAnnotation = "express.medallia.com/config-changeset"

// HoldReadyAnnotation on a pod keeps KWOK's pod-ready stage from making it
// Ready: a build that runs and never becomes Ready (expressoperator's
// Stuck).
const HoldReadyAnnotation = "ready.stage.kwok.x-k8s.io/hold"

// PodEvent is one step of an Express pod's life as Kubernetes ran it: bound
// to a Node by the scheduler (its start: it was admitted schedulable, or
// its scheduling gates went), Ready (KWOK), or Terminating (deleted, in its
// grace period).
type PodEvent struct {
	Namespace, Node, Pod string
	UID                  types.UID
	// Hash is the pod's target-hash label, Version its version label,
	// Config its configChangeset (ConfigAnnotation); Machine the Node it
	// is bound to.
	Hash, Version, Config, Machine string
	// Ready: the pod became Ready; Terminating: it was being deleted;
	// otherwise it was bound to a Node.
	Ready, Terminating bool
	// Gated: the pod was seen with scheduling gates before it was bound.
	// Schedulable is when it was first seen without them (created
	// schedulable, or its gates gone): the moment the order let it go.
	Gated       bool
	Schedulable time.Time
	At          time.Time
}

// PodLog records, from a watch of Express pods, when each pod was bound to
// a Node, became Ready and began terminating (or was deleted, if no
// Terminating state was seen), each once per pod.
type PodLog struct {
	mu     sync.Mutex
	events []PodEvent
	seen   map[types.UID][4]bool
	// schedulable is when each pod was first seen without scheduling gates.
	schedulable map[types.UID]time.Time
	on          func(PodEvent)
}

// WatchPods records the Express pods of the API server cfg names until ctx
// ends, calling each of on with every event as it is recorded.
func WatchPods(ctx context.Context, cfg *rest.Config, on ...func(PodEvent)) (*PodLog, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	l := &PodLog{seen: map[types.UID][4]bool{}, schedulable: map[types.UID]time.Time{}, on: func(e PodEvent) {
		for _, f := range on {
			f(e)
		}
	}}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = v2alpha1.LabelNode
	}))
	inf := factory.Core().V1().Pods().Informer()
	record := func(obj any) {
		if p, ok := obj.(*corev1.Pod); ok {
			l.observe(p)
		}
	}
	gone := func(obj any) {
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if p, ok := obj.(*corev1.Pod); ok {
			p = p.DeepCopy()
			if p.DeletionTimestamp == nil { // deleted at once: no Terminating update was seen
				p.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}
			l.observe(p)
		}
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }, DeleteFunc: gone}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("the pod watch did not sync")
	}
	return l, nil
}

func (l *PodLog) observe(p *corev1.Pod) {
	now := time.Now()
	bound := p.Spec.NodeName != ""
	ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
		return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	seen := l.seen[p.UID]
	event := PodEvent{Namespace: p.Namespace, Node: p.Labels[v2alpha1.LabelNode], Pod: p.Name, UID: p.UID, Hash: p.Labels[v2alpha1.LabelTargetHash],
		Version: p.Labels[v2alpha1.LabelExpressVersion], Config: p.Annotations[ConfigAnnotation], Machine: p.Spec.NodeName, At: now}
	var recorded []PodEvent
	seen[3] = seen[3] || len(p.Spec.SchedulingGates) > 0
	if _, ok := l.schedulable[p.UID]; !ok && len(p.Spec.SchedulingGates) == 0 {
		l.schedulable[p.UID] = now
	}
	if bound && !seen[0] {
		seen[0] = true
		ev := event
		ev.Gated, ev.Schedulable = seen[3], l.schedulable[p.UID]
		recorded = append(recorded, ev)
	}
	if ready && p.DeletionTimestamp == nil && !seen[1] {
		seen[1] = true
		ev := event
		ev.Ready = true
		recorded = append(recorded, ev)
	}
	if p.DeletionTimestamp != nil && !seen[2] {
		seen[2] = true
		ev := event
		ev.Terminating = true
		recorded = append(recorded, ev)
	}
	l.seen[p.UID] = seen
	l.events = append(l.events, recorded...)
	for _, e := range recorded {
		l.on(e) // under the lock: in the order recorded
	}
}

// Since returns the events of namespace ns at or after since, in order.
func (l *PodLog) Since(ns string, since time.Time) []PodEvent {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []PodEvent
	for _, e := range l.events {
		if e.Namespace == ns && !e.At.Before(since) {
			out = append(out, e)
		}
	}
	return out
}

// Bound returns the events of namespace ns where a pod was bound to a
// Node (its start), in order: one per pod.
func (l *PodLog) Bound(ns string) []PodEvent {
	var out []PodEvent
	for _, e := range l.Since(ns, time.Time{}) {
		if !e.Ready && !e.Terminating {
			out = append(out, e)
		}
	}
	return out
}

// Starts returns the nodes of ns whose pods were bound to a Node at or
// after since, in the order their first pod was: a node is listed again
// when its pods start again after another node's did.
func (l *PodLog) Starts(ns string, since time.Time) []string {
	var out []string
	for _, e := range l.Since(ns, since) {
		if !e.Ready && !e.Terminating && (len(out) == 0 || out[len(out)-1] != e.Node) {
			out = append(out, e.Node)
		}
	}
	return out
}
