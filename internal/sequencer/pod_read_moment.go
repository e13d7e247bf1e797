package sequencer

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// fallbackPodGone: the node read by name is not the one the cache guessed
// from. Gone, its pods are admitted with a warning; moved to another
// tenant, they are judged in that one: only the whole read tells which.
var fallbackPodGone = rollout.Fallback{Label: rollout.FallbackCache, Why: "the node is gone from the API server or of another tenant than the cache says"}

// MayStartByName reports whether new pods of node name may start on what
// their start rests on, read by name (GatherForPod, then
// rollout.PodsMayStartByName). Where they may not, the Fallback is none
// only where the read holds them; otherwise it says why the names could
// not be read, or the node not found as the cache has it, and the caller
// reads the tenant whole.
//
// A read by name is many reads, each at its own moment, where a LIST is
// one: be-0 read Ready before it crashes, and be-1 read Ready after it
// turns Ready, are never both Ready at once. So a yes is given only where
// everything read is read again (the nodes through their list, below),
// once the first read is done, and found unchanged: an object at the same
// resourceVersion was not written from that revision until it was read
// again (a write, a deletion and creation too, gives it a new one), so
// every object found held what was read at every moment from the newest of
// their revisions, R, to the second read.
//
// An object absent at both reads may still have been there in between.
// Absent, a StatefulSet or a machine only holds the pod. A pod does not: a
// node is Ready when it has as many Ready pods as its StatefulSet wants,
// counted, so a StatefulSet scaled down from two to one, its pod 1 Ready
// and pod 0 not found, is Ready — unless pod 0 was made, not Ready, and
// deleted again between its two reads. So a yes is not given on a read
// that did not find a pod of a StatefulSet of a live node (absentPod): the
// tenant is read whole (fallback moved). And a node that is absent lets the pod go — a
// frontend before its own created, and deleted again, between two reads of
// its name. So the namespace's Backends and Frontends are listed, between
// the two reads, consistently and at one revision C (nodesNow), no older
// than the admission nor than R, and must be as the first read found them
// (nodesDiffer): every object read is then as read at that one revision,
// as the objects of one LIST are. What no name reaches is not read: a pod
// above a StatefulSet's replicas and its status's, the cache has not seen,
// made by a controller that has not written its status since; so a
// StatefulSet whose controller has not acted on its spec yet
// (unobservedSet) has the tenant read whole too. A machine is compared as
// every object is, on its resourceVersion: Ready at both reads, it may
// have been lost in between, so a heartbeat between the two reads has the
// tenant read whole. Otherwise the tenant is read whole (fallback moved).
//
// hash is the new pod's target-hash label: a pod of a target its node is
// not released for (rollout.Snapshot.OfUnreleasedTarget) is held on the
// first read, which holds no StatefulSet of the node to tell whether it
// waits for the node's release (AwaitsRelease); the sequencer's plan, on
// a fresh read, lets it go where it does not.
func MayStartByName(ctx context.Context, cache, fresh client.Reader, namespace, name, hash string, orders defaults.Orders, now time.Time, grouping rollout.Grouping) (bool, rollout.Fallback, error) {
	first := &recordedReads{Reader: fresh, got: map[readKey]readAnswer{}}
	snap, why, err := GatherForPod(ctx, cache, first, namespace, name, orders, now, grouping)
	if err != nil || !why.None() {
		return false, why, err
	}
	if _, ok := snap.Nodes[name]; !ok {
		return false, fallbackPodGone, nil
	}
	if !rollout.PodsMayStartByName(snap, name) || snap.OfUnreleasedTarget(name, hash) {
		return false, rollout.Fallback{}, nil
	}
	if missed := first.mayHaveMissed(snap, "what the pod's start rests on was read"); missed != "" {
		return false, rollout.Fallback{Label: rollout.FallbackMoved, Why: missed}, nil
	}
	nodes, err := nodesNow(ctx, fresh, namespace)
	if err != nil {
		return false, rollout.Fallback{}, err
	}
	moved, err := first.changed(ctx, fresh)
	if err != nil {
		return false, rollout.Fallback{}, err
	}
	if moved == "" {
		moved = first.nodesDiffer(nodes)
	}
	if moved != "" {
		return false, rollout.Fallback{Label: rollout.FallbackMoved, Why: moved + " changed while what the pod's start rests on was read"}, nil
	}
	return true, rollout.Fallback{}, nil
}

// readKey names one object read: its Go type, namespace and name.
type readKey struct {
	kind reflect.Type
	key  client.ObjectKey
}

// readAnswer is what a Get answered: the object's resourceVersion, or that
// it was absent or forbidden.
type readAnswer struct {
	version           string
	absent, forbidden bool
}

// recordedReads is a client.Reader that records what each Get of the
// reader it wraps answered. A Get that failed otherwise is not recorded: the
// read it belongs to fails with it. A List is not recorded: GatherForPod
// reads fresh by Get alone.
type recordedReads struct {
	client.Reader
	mu  sync.Mutex
	got map[readKey]readAnswer
	// sets are, by name, what absentPod and unobservedSet read of each
	// StatefulSet found.
	sets map[client.ObjectKey]setRead
}

func (r *recordedReads) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	answer, ok := answerOf(obj, err)
	if ok {
		r.mu.Lock()
		r.got[readKey{reflect.TypeOf(obj).Elem(), key}] = answer
		if set, isSet := obj.(*appsv1.StatefulSet); isSet && err == nil {
			first := 0
			if set.Spec.Ordinals != nil {
				first = int(set.Spec.Ordinals.Start)
			}
			if r.sets == nil {
				r.sets = map[client.ObjectKey]setRead{}
			}
			r.sets[key] = setRead{first: first, observed: set.Status.ObservedGeneration == set.Generation}
		}
		r.mu.Unlock()
	}
	return err
}

// answerOf is what a Get that filled obj and returned err answered, and
// whether it answered at all.
func answerOf(obj client.Object, err error) (readAnswer, bool) {
	switch {
	case err == nil:
		return readAnswer{version: obj.GetResourceVersion()}, true
	case apierrors.IsNotFound(err):
		return readAnswer{absent: true}, true
	case apierrors.IsForbidden(err):
		return readAnswer{forbidden: true}, true
	}
	return readAnswer{}, false
}

// changed reads again, from fresh and all at once, every object r
// recorded but the nodes, and names the first found changed ("" where none
// is). An object read again at another resourceVersion, come or gone,
// changed: a write to it in between gave it a new one. The nodes need no
// second read: nodesDiffer compares them at the nodes' list revision,
// which lies between the admission, the newest revision found, and this
// read.
func (r *recordedReads) changed(ctx context.Context, fresh client.Reader) (string, error) {
	keys := make([]readKey, 0, len(r.got))
	for k := range r.got {
		if !isNodeKind(k.kind) {
			keys = append(keys, k)
		}
	}
	moved := make([]bool, len(keys))
	var g errgroup.Group
	for i, k := range keys {
		g.Go(func() error {
			obj := reflect.New(k.kind).Interface().(client.Object)
			err := fresh.Get(ctx, k.key, obj)
			answer, ok := answerOf(obj, err)
			if !ok {
				return fmt.Errorf("reading %s %s again: %w", k.kind.Name(), k.key, err)
			}
			moved[i] = answer != r.got[k]
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return "", err
	}
	for i, k := range keys {
		if moved[i] {
			return fmt.Sprintf("%s %s", k.kind.Name(), k.key), nil
		}
	}
	return "", nil
}

// nodesNow lists namespace's Backends and Frontends, each a consistent
// list, made one revision (atOneRevision), and returns what a Get of each
// would have answered then. Consistent, that revision is no older than the
// pod's admission, nor than any object the read by name found; a list no
// older than the newest object found would be answered at once from a
// watch cache that has seen no write of its kind since, at a revision from
// before the admission.
func nodesNow(ctx context.Context, fresh client.Reader, namespace string) (map[readKey]readAnswer, error) {
	var bes v2alpha1.BackendList
	var fes v2alpha1.FrontendList
	lists := []listed{
		{&bes, []client.ListOption{client.InNamespace(namespace)}, "Backends"},
		{&fes, []client.ListOption{client.InNamespace(namespace)}, "Frontends"},
	}
	var g errgroup.Group
	for _, l := range lists {
		g.Go(func() error {
			if err := fresh.List(ctx, l.list, l.opts...); err != nil {
				return fmt.Errorf("listing %s in %s: %w", l.what, namespace, err)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	if _, err := atOneRevision(ctx, fresh, namespace, lists); err != nil {
		return nil, err
	}
	out := map[readKey]readAnswer{}
	for _, n := range nodesOf(bes.Items, fes.Items) {
		out[readKey{reflect.TypeOf(n).Elem(), client.ObjectKeyFromObject(n)}] = readAnswer{version: n.GetResourceVersion()}
	}
	return out, nil
}

// nodesDiffer names the first Backend or Frontend r recorded that nodes,
// listed at one revision, do not hold as r found it ("" where none).
func (r *recordedReads) nodesDiffer(nodes map[readKey]readAnswer) string {
	for k, a := range r.got {
		if !isNodeKind(k.kind) {
			continue
		}
		at, ok := nodes[k]
		if !ok {
			at = readAnswer{absent: true}
		}
		if at != a {
			return fmt.Sprintf("%s %s", k.kind.Name(), k.key)
		}
	}
	return ""
}

// setRead is what a pod's start reads of a StatefulSet found: its first
// ordinal (spec.ordinals.start), and whether its controller has acted on
// its spec as it is (status.observedGeneration).
type setRead struct {
	first    int
	observed bool
}

// absentPod names the first pod r recorded as not found that is one of the
// ordinals of a StatefulSet found, named after a node live in snap (""
// where none): made and deleted again between its reads, not Ready, it
// would have had its node not Ready — whatever its ordinal, as Ready
// counts every pod of the StatefulSet, and a StatefulSet controller that
// has not seen a scale down yet makes again a pod above the new replicas.
// An ordinal below the first (spec.ordinals.start) is only the guess of a
// read whose cache knew no pod of the node: the controller makes none
// there. A pod of a node that is down holds nothing.
func (r *recordedReads) absentPod(snap *rollout.Snapshot) string {
	var names []string
	for k, a := range r.got {
		if !a.absent || k.kind != reflect.TypeFor[corev1.Pod]() {
			continue
		}
		for set, read := range r.sets {
			o, ok := ordinalOf(k.key.Name, set.Name)
			if ok && o >= read.first && liveIn(snap, set.Name) {
				names = append(names, k.key.String())
			}
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// unobservedSet names the first StatefulSet r found, of a node live in
// snap, whose controller has not acted on its spec yet ("" where none):
// scaled up and down again before it wrote its status, it may have made a
// pod above both its replicas and its status's, which no read by name
// reaches (it reads the ordinals below them and the pods the cache knows).
// Once its controller has acted on the spec, its status counts every pod
// it made.
func (r *recordedReads) unobservedSet(snap *rollout.Snapshot) string {
	var names []string
	for set, read := range r.sets {
		if !read.observed && liveIn(snap, set.Name) {
			names = append(names, set.String())
		}
	}
	slices.Sort(names)
	if len(names) == 0 {
		return ""
	}
	return names[0]
}

// mayHaveMissed names what r, a read by name of snap, may have missed (""
// where nothing): a pod of a StatefulSet it found absent (absentPod), which
// may have been made and deleted between its reads, or a StatefulSet whose
// controller has not acted on its spec (unobservedSet). while says what
// was being read.
func (r *recordedReads) mayHaveMissed(snap *rollout.Snapshot, while string) string {
	if pod := r.absentPod(snap); pod != "" {
		return "pod " + pod + " was not found: it may have been made and deleted again, not Ready, while " + while
	}
	if set := r.unobservedSet(snap); set != "" {
		return "StatefulSet " + set + " has a spec its controller has not acted on yet: it may have made a pod no read by name reaches"
	}
	return ""
}

// liveIn reports whether node name is in snap and live.
func liveIn(snap *rollout.Snapshot, name string) bool {
	n, ok := snap.Nodes[name]
	return ok && rollout.Live(n)
}

// isNodeKind reports whether kind is a Backend's or a Frontend's Go type.
func isNodeKind(kind reflect.Type) bool {
	return kind == reflect.TypeFor[v2alpha1.Backend]() || kind == reflect.TypeFor[v2alpha1.Frontend]()
}
