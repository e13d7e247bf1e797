package sequencer

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"
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
// cache knows, and the machines its Ready pods run on. It lays them over
// the cached snapshot: the records a release writes (released-set-revision,
// released-after) and a RolloutComplete record rest on this workload as it
// is now, which the release guard does not judge.
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
	ns := cached.Tenant.Namespace
	sets := make([]appsv1.StatefulSet, len(scope))
	absent := make([]bool, len(scope)) // no StatefulSet: a node that never had pods, or the contract's fallback
	why := make([]string, len(scope))
	var g errgroup.Group
	for i, name := range scope {
		g.Go(func() error {
			err := fresh.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sets[i])
			switch {
			case apierrors.IsNotFound(err):
				absent[i] = true
			case apierrors.IsForbidden(err):
				why[i] = "StatefulSets may not be read by name (RBAC get on statefulsets in group apps)"
			case err != nil:
				return fmt.Errorf("reading StatefulSet %s/%s: %w", ns, name, err)
			case sets[i].Spec.Template.Labels[v2alpha1.LabelNode] != name:
				why[i] = fmt.Sprintf("StatefulSet %s makes pods of %q, not of the node named after it", name, sets[i].Spec.Template.Labels[v2alpha1.LabelNode])
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, rollout.Fallback{}, err
	}
	if w := firstReason(why); w != "" {
		return nil, rollout.Fallback{Label: rollout.FallbackNaming, Why: w}, nil
	}
	// The ordinals to read: every one the StatefulSet has or wants, and
	// every one the cache knows of (a pod being deleted above them).
	type podKey struct {
		set  int
		name string
	}
	var keys []podKey
	for i, name := range scope {
		var known corev1.PodList
		if err := cache.List(ctx, &known, client.InNamespace(ns), client.MatchingFields{IndexPodNode: name}); err != nil {
			return nil, rollout.Fallback{}, fmt.Errorf("listing pods of %s/%s: %w", ns, name, err)
		}
		if absent[i] {
			if len(known.Items) > 0 {
				return nil, rollout.Fallback{Label: rollout.FallbackNaming, Why: fmt.Sprintf("%s has pods but no StatefulSet named after it", name)}, nil
			}
			continue // no workload: a node not provisioned yet
		}
		ordinals := map[int]bool{}
		for o := range max(int(ptr.Deref(sets[i].Spec.Replicas, 1)), int(sets[i].Status.Replicas)) {
			ordinals[o] = true
		}
		for _, p := range known.Items {
			o, ok := ordinalOf(p.Name, name)
			if !ok {
				return nil, rollout.Fallback{Label: rollout.FallbackNaming, Why: fmt.Sprintf("pod %s of %s is not one of StatefulSet %s's ordinals", p.Name, name, name)}, nil
			}
			ordinals[o] = true
		}
		for o := range ordinals {
			keys = append(keys, podKey{i, name + "-" + strconv.Itoa(o)})
		}
	}
	pods := make([]corev1.Pod, len(keys))
	found := make([]bool, len(keys))
	foreign := make([]string, len(keys))
	var reads errgroup.Group
	for j, k := range keys {
		reads.Go(func() error {
			err := fresh.Get(ctx, client.ObjectKey{Namespace: ns, Name: k.name}, &pods[j])
			switch {
			case apierrors.IsNotFound(err):
				return nil // not created yet, or gone: the StatefulSet says what it wants
			case err != nil:
				return fmt.Errorf("reading pod %s/%s: %w", ns, k.name, err)
			}
			found[j] = true
			if ref := metav1.GetControllerOf(&pods[j]); ref == nil || ref.Kind != "StatefulSet" || ref.UID != sets[k.set].UID ||
				pods[j].Labels[v2alpha1.LabelNode] != scope[k.set] {
				foreign[j] = fmt.Sprintf("pod %s is not one of StatefulSet %s's pods of the node", k.name, scope[k.set])
			}
			return nil
		})
	}
	if err := reads.Wait(); err != nil {
		return nil, rollout.Fallback{}, err
	}
	if w := firstReason(foreign); w != "" {
		return nil, rollout.Fallback{Label: rollout.FallbackNaming, Why: w}, nil
	}
	var read []corev1.Pod
	for j := range pods {
		if found[j] {
			read = append(read, pods[j])
		}
	}
	lost, err := lostMachines(ctx, fresh, read, false)
	if err != nil {
		return nil, rollout.Fallback{}, err
	}
	nodes := make([]v2alpha1.Node, 0, len(cached.Nodes))
	for _, n := range cached.Nodes {
		nodes = append(nodes, n)
	}
	var existing []appsv1.StatefulSet
	for i := range sets {
		if !absent[i] {
			existing = append(existing, sets[i])
		}
	}
	snap := rollout.SnapshotOf(rollout.Objects{Nodes: nodes, Pods: read, StatefulSets: existing, LostMachines: lost}, cached.Tenant, cached.Orders, cached.Now)
	return cached.WithWorkloadOf(snap, scope), rollout.Fallback{}, nil
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
