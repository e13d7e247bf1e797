package cluster

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	toolscache "k8s.io/client-go/tools/cache"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A black-box oracle of the order, shared with nothing of the planner: it
// watches a tenant's pods and nodes through informers of its own, and
// judges each release of a node (the sequencer's gate removed) and each
// pod made schedulable by what the pods showed at that moment, for the
// default orders of DESIGN §3.

// observed is one state of a pod or a node, as the oracle's informers saw
// it.
type observed struct {
	// at is when the oracle's informer delivered it; rv is the API
	// server's revision of it (its resourceVersion: one etcd orders every
	// kind alike), by which the oracle replays what it saw — its informers
	// deliver apart, a pod's Ready after a release it came before.
	at   time.Time
	rv   uint64
	pod  bool
	node string // the node's name; a pod's express.medallia.com/node label
	// A pod's.
	uid, name                          string
	ready, terminating, gated, deleted bool
	hash, version                      string
	// A node's: whether it carries the sequencer's gate, and its target.
	sequencerGated bool
	target         string
	// Who owns what: a pod's controller (its StatefulSet's UID), a node's
	// UID, and — for a StatefulSet (set) — its UID in uid and the UID of
	// the Express node that owns it in owner. A pod counts for the node of
	// its label only while its StatefulSet is owned by that node as it is
	// now: an earlier node of the same name is another object.
	controller, nodeUID, owner string
	set                        bool
}

// orderLog is what the oracle's informers saw of one namespace, in order.
type orderLog struct {
	mu     sync.Mutex
	events []observed
	newest uint64
}

// add records e, delivered now, as stored at revision rv.
func (l *orderLog) add(e observed, rv string) { l.record(e, rv, time.Now()) }

// record records e, delivered at at, as stored at revision rv. A deletion
// the watch missed (its final state unknown, rv "") is placed at the
// newest revision seen: a guess — the relist that shows it may be at a
// later revision, the deletion at any revision since the pod's last.
func (l *orderLog) record(e observed, rv string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.at = at
	if rv == "" {
		e.rv = l.newest
	} else {
		e.rv, _ = strconv.ParseUint(rv, 10, 64)
	}
	l.newest = max(l.newest, e.rv)
	l.events = append(l.events, e)
}

// snapshot is what the log saw, in the order the API server stored it.
func (l *orderLog) snapshot() []observed {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.events)
	slices.SortStableFunc(out, func(a, b observed) int { return cmp.Compare(a.rv, b.rv) })
	return out
}

// watchOrder records ns's Express pods, Backends and Frontends until ctx
// ends.
func watchOrder(ctx context.Context, t *testing.T, ns string) *orderLog {
	t.Helper()
	log := &orderLog{}
	dyn, err := dynamic.NewForConfig(harness.Config)
	require.NoError(t, err)
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, ns, nil)
	pod := func(obj any, deleted bool) {
		known := true
		if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
			obj, known = d.Obj, false
		}
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		var p corev1.Pod
		if runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p) != nil || p.Labels[v2alpha1.LabelNode] == "" {
			return
		}
		ready := slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool {
			return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue
		})
		rv := p.ResourceVersion
		if !known {
			rv = ""
		}
		var controller string
		if ref := metav1.GetControllerOf(&p); ref != nil {
			controller = string(ref.UID)
		}
		log.add(observed{pod: true, node: p.Labels[v2alpha1.LabelNode], uid: string(p.UID), name: p.Name, ready: ready,
			terminating: p.DeletionTimestamp != nil, gated: len(p.Spec.SchedulingGates) > 0, deleted: deleted,
			hash: p.Labels[v2alpha1.LabelTargetHash], version: p.Labels[v2alpha1.LabelExpressVersion], controller: controller}, rv)
	}
	set := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		for _, ref := range u.GetOwnerReferences() {
			if strings.HasPrefix(ref.APIVersion, v2alpha1.GroupVersion.Group+"/") {
				log.add(observed{set: true, uid: string(u.GetUID()), owner: string(ref.UID)}, u.GetResourceVersion())
			}
		}
	}
	node := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		gates, _, _ := unstructured.NestedSlice(u.Object, "spec", "rolloutGates")
		gated := slices.ContainsFunc(gates, func(g any) bool {
			m, ok := g.(map[string]any)
			return ok && m["name"] == v2alpha1.GateSequencer
		})
		log.add(observed{node: u.GetName(), sequencerGated: gated, target: u.GetAnnotations()[v2alpha1.AnnotationTargetHash], nodeUID: string(u.GetUID())}, u.GetResourceVersion())
	}
	pods := f.ForResource(corev1.SchemeGroupVersion.WithResource("pods")).Informer()
	_, err = pods.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { pod(o, false) }, UpdateFunc: func(_, o any) { pod(o, false) }, DeleteFunc: func(o any) { pod(o, true) }})
	require.NoError(t, err)
	_, err = f.ForResource(appsv1.SchemeGroupVersion.WithResource("statefulsets")).Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: set, UpdateFunc: func(_, o any) { set(o) }})
	require.NoError(t, err)
	for _, resource := range []string{"backends", "frontends"} {
		gvr := schema.GroupVersionResource{Group: v2alpha1.GroupVersion.Group, Version: v2alpha1.GroupVersion.Version, Resource: resource}
		_, err := f.ForResource(gvr).Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: node, UpdateFunc: func(_, o any) { node(o) }})
		require.NoError(t, err)
	}
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	return log
}

// observedPod is a pod as the log shows it at one instant.
type observedPod struct {
	ready, terminating bool
	hash, controller   string
}

// observedState is the tenant as the log shows it at one instant: each
// node's pods by UID, and each node's latest state.
type observedState struct {
	pods  map[string]map[string]observedPod
	nodes map[string]observed
	// owners are the Express node UID that owns each StatefulSet, by UID.
	owners map[string]string
}

// replay is the tenant as the first n events (in revision order) left it.
func replay(events []observed, n int) observedState {
	s := observedState{pods: map[string]map[string]observedPod{}, nodes: map[string]observed{}, owners: map[string]string{}}
	for _, e := range events[:n] {
		switch {
		case e.set:
			s.owners[e.uid] = e.owner
		case !e.pod:
			s.nodes[e.node] = e
		case e.deleted:
			delete(s.pods[e.node], e.uid)
		default:
			if s.pods[e.node] == nil {
				s.pods[e.node] = map[string]observedPod{}
			}
			s.pods[e.node][e.uid] = observedPod{ready: e.ready, terminating: e.terminating, hash: e.hash, controller: e.controller}
		}
	}
	return s
}

// storedBy is, for each event (in revision order), a time it was stored by:
// the earliest delivery of it or of any later revision — a later revision
// was stored after it, and was delivered after it was stored.
func storedBy(events []observed) []time.Time {
	out := make([]time.Time, len(events))
	for i := len(events) - 1; i >= 0; i-- {
		out[i] = events[i].at
		if i+1 < len(events) && out[i+1].Before(out[i]) {
			out[i] = out[i+1]
		}
	}
	return out
}

// ready reports whether node has at least want pods Ready and not
// Terminating; onTarget, also every pod not Terminating on the node's
// target.
func (s observedState) ready(node string, want int, onTarget bool) bool {
	n := 0
	for _, p := range s.pods[node] {
		if owner, known := s.owners[p.controller]; p.terminating || known && owner != s.nodes[node].nodeUID {
			continue // stopping, or the workload of an earlier node of the name
		}
		if onTarget && p.hash != s.nodes[node].target {
			return false
		}
		if p.ready {
			n++
		}
	}
	return n >= want
}

// observedReadyDuring reports whether node was ready (want, onTarget) as
// the events stored before when left it, or after any event from there to
// events[decision], the decision's own: a decision reads the API server a
// moment before it is written. stored is storedBy(events).
func observedReadyDuring(events []observed, stored []time.Time, node string, when time.Time, decision, want int, onTarget bool) bool {
	// stored never decreases: the events stored before when are a prefix.
	from := sort.Search(decision, func(i int) bool { return !stored[i].Before(when) })
	for n := from; n <= decision+1; n++ {
		if replay(events, n).ready(node, want, onTarget) {
			return true
		}
	}
	return false
}

// lastReady returns when the oracle saw the last event before
// events[decision] after which node was ready (want, onTarget), zero if
// none: what a failure reports.
func lastReady(events []observed, node string, decision, want int, onTarget bool) time.Time {
	var last time.Time
	for n := 1; n <= decision; n++ {
		if replay(events, n).ready(node, want, onTarget) {
			last = events[n-1].at
		}
	}
	return last
}

// Every node here has three replicas; the default orders of a 4-node
// tenant.
var (
	upgradeOrder      = []string{"acme-fe1", "acme-fe2", "acme-be", "acme-fe3"}
	provisioningOrder = []string{"acme-be", "acme-fe1", "acme-fe2", "acme-fe3"}
)

// oracleSlack is how long before a decision was stored (by storedBy's
// bound) the oracle looks for the state it rested on. A
// decision rests on a read made before its write: the release guard's
// fresh read, 50–300 ms before the write is seen on a loaded machine
// (docs/performance.md), and a pod the churn deletes after that read is
// lost after the decision, not before it. Measured: a Backend released
// 88 ms after fe1 lost a pod, the read having found fe1 Ready. The order
// of what was stored is the API server's (revisions), not the order the
// oracle's informers delivered it in.
const oracleSlack = time.Second

// checkOrder asserts, for a change to all since since on want replicas per
// node: each release of a node came while every upgrade predecessor was
// Ready on its target and every provisioning predecessor Ready; each pod
// made schedulable came while every provisioning predecessor was Ready.
// The events are a log's snapshot: in revision order.
func checkOrder(t *testing.T, events []observed, since time.Time, want int) {
	t.Helper()
	for _, failure := range orderFailures(events, since, want) {
		assert.Fail(t, failure)
	}
}

// orderFailures is what checkOrder finds out of order.
func orderFailures(events []observed, since time.Time, want int) []string {
	var failures []string
	stored := storedBy(events)
	judge := func(what string, i int, onTarget bool) {
		e := events[i]
		order, predecessor, ready := provisioningOrder, "provisioning predecessor", "Ready"
		if onTarget {
			order, predecessor, ready = upgradeOrder, "upgrade predecessor", "Ready on its target"
		}
		for _, prev := range order[:max(slices.Index(order, e.node), 0)] {
			// The decision was stored by stored[i], its read before that.
			if !observedReadyDuring(events, stored, prev, stored[i].Add(-oracleSlack), i, want, onTarget) {
				failures = append(failures, fmt.Sprintf("%s at %s (revision %d) while its %s %s was not %s (last so at %s)", what, e.at.Format(time.StampMilli), e.rv,
					predecessor, prev, ready, lastReady(events, prev, i, want, onTarget).Format(time.StampMilli)))
			}
		}
	}
	wasGated, scheduled := map[string]bool{}, map[string]bool{}
	for i, e := range events {
		switch {
		case !e.pod:
			if wasGated[e.node] && !e.sequencerGated && !e.at.Before(since) {
				judge(e.node+" released", i, true)
				judge(e.node+" released", i, false)
			}
			wasGated[e.node] = e.sequencerGated
		case e.deleted || e.gated || scheduled[e.uid]:
		default:
			scheduled[e.uid] = true
			if !e.at.Before(since) {
				judge(fmt.Sprintf("pod %s (%s) of %s schedulable", e.name, e.version, e.node), i, false)
			}
		}
	}
	return failures
}
