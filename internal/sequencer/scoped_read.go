package sequencer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// GatherScoped reads, straight from the API server (fresh) and by name,
// the workload of each node of scope under the contract's naming rule —
// one StatefulSet per node, named after it, owning every pod of the node,
// its pods its ordinals (docs/express-operator-contract.md): the
// StatefulSet, every ordinal pod it has or wants, every pod of the node the
// cache knows, and the machines its pods run on. It lays them over
// the cached snapshot: the records a release writes (released-set-revision,
// released-after) and a RolloutComplete record rest on this workload as it
// is now, which the release guard does not judge.
//
// The reads are GETs, each answered by etcd as it is at that moment, and
// they go out together: the StatefulSets, the pods the cache knows of (or
// ordinal 0 of a node it knows no pod of) and the machines those pods ran
// on when the cache last saw them, in one round trip. Only what that round
// shows the guess missed — an ordinal the StatefulSet wants that was not
// read, the machine of a pod scheduled since — is read in a second (and a
// machine of such a pod in a third). Every object the snapshot holds is
// read fresh; a guess only decides when it is read. A machine guessed is
// read in the same round trip as its pod, not after it: a Node deleted
// between the two reads is seen by the next read, the release guard's,
// which reads machines after pods; a machine's Ready condition lags its
// loss by the node lifecycle controller's grace period anyway (40 s by
// default), whatever the order of the two reads.
//
// The nodes themselves stay as the cache has them. That is enough only
// because every release is judged again in its own admission, on a
// consistent read of the whole tenant (the release guard): the read a
// release rests on (DESIGN §4b) is the guard's. The caller checks that the
// guard is registered to judge them (Guard) and that the namespace is in
// enforce, read fresh; otherwise the sequencer reads the whole tenant
// itself (GatherFresh).
//
// It returns why the naming rule does not hold, with no snapshot, when a
// node of scope with pods has no StatefulSet named after it, that
// StatefulSet makes another node's pods, or a pod of the node (fresh, or in
// the cache) is not one of its ordinals: the tenant is then read whole. A
// node with neither has no workload yet (not provisioned).
func GatherScoped(ctx context.Context, cache, fresh client.Reader, cached *rollout.Snapshot, scope []string) (*rollout.Snapshot, rollout.Fallback, error) {
	known, why, err := CachedOrdinals(ctx, cache, cached.Tenant.Namespace, scope)
	if err != nil || !why.None() {
		return nil, why, err
	}
	return gatherScoped(ctx, known, fresh, cached, scope)
}

// gatherScoped is GatherScoped on known, the pods of each node of scope the
// cache knows (CachedOrdinals).
//
// Its reads answer at different moments — a round trip, then the ordinals
// and machines it showed missing — and what they found is made one moment
// as the pod webhook's read by name is (MayStartByName): every object is
// read again, all at once, after the last read; where none changed (its
// resourceVersion, come or gone) each held as read at the moment between
// the two, and the snapshot is the workload at that moment. Where one
// changed — a pod read Ready, then crashed, and another read Ready after
// it: Ready together at no moment — the tenant is read whole
// (FallbackMoved). So too where an ordinal of a StatefulSet was read
// absent twice (it may have been made, not Ready, and deleted between) or
// a StatefulSet's controller has not acted on its spec (absentPod,
// unobservedSet). The release guard judges a release on the whole tenant
// again; what it does not judge — a RolloutComplete record, the records a
// release writes — rests on this moment.
func gatherScoped(ctx context.Context, known [][]corev1.Pod, fresh client.Reader, cached *rollout.Snapshot, scope []string) (*rollout.Snapshot, rollout.Fallback, error) {
	reads := &recordedReads{Reader: fresh, got: map[readKey]readAnswer{}}
	w, why, err := readWorkload(ctx, known, reads, cached.Tenant.Namespace, scope)
	if err != nil || !why.None() {
		return nil, why, err
	}
	nodes := make([]v2alpha1.Node, 0, len(cached.Nodes))
	for _, n := range cached.Nodes {
		nodes = append(nodes, n)
	}
	snap := rollout.SnapshotOf(w.objects(nodes), cached.Tenant, cached.Orders, cached.Now)
	moved, err := reads.changed(ctx, fresh)
	if err != nil {
		return nil, rollout.Fallback{}, err
	}
	notOne := reads.mayHaveMissed(snap, "the workload was read by name")
	if moved != "" {
		notOne = moved + " changed while the workload was read by name"
	}
	if notOne != "" {
		return nil, rollout.Fallback{Label: rollout.FallbackMoved, Why: notOne}, nil
	}
	return cached.WithWorkloadOf(snap, scope), rollout.Fallback{}, nil
}

// CachedOrdinals lists, from the cache, the pods of each node of scope in
// namespace ns, and says why the naming rule does not hold where one of
// them is not an ordinal of the StatefulSet named after its node: then
// nothing need be read by name — the tenant is read whole — and a caller
// that checks this first reads nothing else for the scoped read (an
// operator that names its pods otherwise would pay for a scoped read
// before every read of the whole tenant).
func CachedOrdinals(ctx context.Context, cache client.Reader, ns string, scope []string) ([][]corev1.Pod, rollout.Fallback, error) {
	known := make([][]corev1.Pod, len(scope))
	for i, name := range scope {
		var pods corev1.PodList
		if err := cache.List(ctx, &pods, client.InNamespace(ns), client.MatchingFields{IndexPodNode: name}); err != nil {
			return nil, rollout.Fallback{}, fmt.Errorf("listing pods of %s/%s: %w", ns, name, err)
		}
		for _, p := range pods.Items {
			if _, ok := ordinalOf(p.Name, name); !ok {
				return nil, rollout.Fallback{Label: rollout.FallbackNaming, Why: fmt.Sprintf("pod %s of %s is not one of StatefulSet %s's ordinals", p.Name, name, name)}, nil
			}
		}
		known[i] = pods.Items
	}
	return known, rollout.Fallback{}, nil
}

// workload is what a scoped read found of its nodes' workload: their
// pods, their StatefulSets and the lost machines their pods run on.
type workload struct {
	pods []corev1.Pod
	sets []appsv1.StatefulSet
	lost map[string]bool
}

// objects are the workload with nodes, for rollout.SnapshotOf.
func (w workload) objects(nodes []v2alpha1.Node) rollout.Objects {
	return rollout.Objects{Nodes: nodes, Pods: w.pods, StatefulSets: w.sets, LostMachines: w.lost}
}

// readCachedWorkload is readWorkload guessing from what cache knows.
func readCachedWorkload(ctx context.Context, cache, fresh client.Reader, ns string, scope []string) (workload, rollout.Fallback, error) {
	known, why, err := CachedOrdinals(ctx, cache, ns, scope)
	if err != nil || !why.None() {
		return workload{}, why, err
	}
	return readWorkload(ctx, known, fresh, ns, scope)
}

// readWorkload reads fresh, by name, the workload of each node of scope in
// namespace ns, guessing from known, what the cache knows of each node's
// pods (CachedOrdinals), which ordinals and machines to read in the first
// round trip (GatherScoped). A Fallback that is not None says why the
// naming rule does not hold.
func readWorkload(ctx context.Context, known [][]corev1.Pod, fresh client.Reader, ns string, scope []string) (workload, rollout.Fallback, error) {
	r := newPodReads(ns, fresh)
	for i, name := range scope {
		for _, p := range known[i] {
			o, _ := ordinalOf(p.Name, name)
			r.want(i, name, o)
			r.wantMachine(p.Spec.NodeName)
		}
		if len(known[i]) == 0 {
			r.want(i, name, 0)
		}
	}
	sets := make([]appsv1.StatefulSet, len(scope))
	absent := make([]bool, len(scope)) // no StatefulSet: a node that never had pods, or the contract's fallback
	why := make([]string, len(scope))
	// A read that failed is said only where no reason to read the tenant
	// whole was found: the whole tenant is read then, whatever failed.
	errs := make([]error, len(scope)+1)
	var wg sync.WaitGroup
	for i, name := range scope {
		wg.Go(func() {
			err := fresh.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sets[i])
			switch {
			case apierrors.IsNotFound(err):
				absent[i] = true
			case apierrors.IsForbidden(err):
				why[i] = "StatefulSets may not be read by name (RBAC get on statefulsets in group apps)"
			case err != nil:
				errs[i] = fmt.Errorf("reading StatefulSet %s/%s: %w", ns, name, err)
			case sets[i].Spec.Template.Labels[v2alpha1.LabelNode] != name:
				why[i] = fmt.Sprintf("StatefulSet %s makes pods of %q, not of the node named after it", name, sets[i].Spec.Template.Labels[v2alpha1.LabelNode])
			}
		})
	}
	wg.Go(func() { errs[len(scope)] = r.read(ctx) })
	wg.Wait()
	if w := firstReason(why); w != "" {
		return workload{}, rollout.Fallback{Label: rollout.FallbackNaming, Why: w}, nil
	}
	if err := errors.Join(errs...); err != nil {
		return workload{}, rollout.Fallback{}, err
	}
	// The ordinals the guess missed: every one the StatefulSet has or wants.
	for i, name := range scope {
		if absent[i] {
			if len(known[i]) > 0 || r.foundOf(i) {
				return workload{}, rollout.Fallback{Label: rollout.FallbackNaming, Why: fmt.Sprintf("%s has pods but no StatefulSet named after it", name)}, nil
			}
			continue // no workload: a node not provisioned yet
		}
		start := 0 // spec.ordinals.start: the StatefulSet's first ordinal
		if sets[i].Spec.Ordinals != nil {
			start = int(sets[i].Spec.Ordinals.Start)
		}
		for o := range max(int(ptr.Deref(sets[i].Spec.Replicas, 1)), int(sets[i].Status.Replicas)) {
			r.want(i, name, start+o)
		}
	}
	// Until nothing is left to read: the pods missed, and the machines of
	// pods read that the first round did not read.
	for r.pending() {
		if err := r.read(ctx); err != nil {
			return workload{}, rollout.Fallback{}, err
		}
	}
	var read []corev1.Pod
	for _, p := range r.found() {
		set := r.setOf[p.Name]
		if ref := metav1.GetControllerOf(p); ref == nil || ref.Kind != "StatefulSet" || ref.UID != sets[set].UID ||
			p.Labels[v2alpha1.LabelNode] != scope[set] {
			return workload{}, rollout.Fallback{Label: rollout.FallbackNaming, Why: fmt.Sprintf("pod %s is not one of StatefulSet %s's pods of the node", p.Name, scope[set])}, nil
		}
		read = append(read, *p)
	}
	var existing []appsv1.StatefulSet
	for i := range sets {
		if !absent[i] {
			existing = append(existing, sets[i])
		}
	}
	lost, err := r.lostOf(read)
	if err != nil {
		return workload{}, rollout.Fallback{}, err
	}
	return workload{pods: read, sets: existing, lost: lost}, rollout.Fallback{}, nil
}

// firstReason is the first reason of why that is not empty.
func firstReason(why []string) string {
	for _, w := range why {
		if w != "" {
			return w
		}
	}
	return ""
}

// ordinalOf returns the ordinal of pod called pod of StatefulSet set
// ("<set>-<ordinal>"), and whether it is one.
func ordinalOf(pod, set string) (int, bool) {
	digits, ok := strings.CutPrefix(pod, set+"-")
	if !ok || digits == "" || len(digits) > 1 && digits[0] == '0' {
		return 0, false
	}
	o, err := strconv.Atoi(digits)
	return o, err == nil && o >= 0 && strconv.Itoa(o) == digits
}
