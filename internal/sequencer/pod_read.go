package sequencer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// podReadRounds bounds the round trips of a pod admission's read by name:
// the first reads what the cache guesses; a second is needed only where a
// node read names nodes the cache did not show it naming.
const podReadRounds = 3

// The reasons a pod admission's read by name gives way to the tenant read
// whole (express_sequencer_pod_admission_reads_total's fallback label).
var (
	fallbackPodUncached = rollout.Fallback{Label: rollout.FallbackCache, Why: "the node is not in the cache: its tenant is not known"}
	fallbackPodMany     = rollout.Fallback{Label: rollout.FallbackWider, Why: "its start rests on more nodes than are read by name"}
	fallbackPodMoving   = rollout.Fallback{Label: rollout.FallbackWider, Why: "the nodes its start rests on kept naming nodes not read yet"}
	fallbackPodBoth     = rollout.Fallback{Label: rollout.FallbackNaming, Why: "a Backend and a Frontend share a name it rests on"}
)

// GatherForPod reads, straight from the API server and by name, what the
// answer that new pods of node name may start rests on (rollout.PodScope):
// the node, every node it can require and the tenant's Backend, each read
// by a GET; and the workload of those it requires, as GatherScoped reads
// it (the operator contract's naming rule). The cache only guesses which
// names to read in the first round trip; what the nodes read name beyond
// the guess is read in the next. The snapshot holds only what was read:
// rollout.PodsMayStartByName decides on it, and where it says no, or a
// Fallback says why the names could not be read, the tenant is read whole.
func GatherForPod(ctx context.Context, cache, fresh client.Reader, namespace, name string, orders defaults.Orders, now time.Time, grouping rollout.Grouping) (*rollout.Snapshot, rollout.Fallback, error) {
	guess, err := cachedNodes(ctx, cache, namespace, name)
	if err != nil || guess == nil {
		return nil, fallbackPodUncached, err
	}
	guess.Orders, guess.Now, guess.Grouping = orders, now, grouping
	scope, few := rollout.PodScope(guess, name)
	found := map[string]v2alpha1.Node{}
	read := map[string]bool{}
	readWorkloadOf := map[string]bool{}
	var all workload
	for range podReadRounds {
		if !few {
			return nil, fallbackPodMany, nil
		}
		var nodes []string
		for _, n := range scope {
			if !read[n] {
				nodes = append(nodes, n)
			}
		}
		var sets []string
		for _, n := range rollout.PodWorkloadScope(scope, name) {
			if !readWorkloadOf[n] {
				sets = append(sets, n)
			}
		}
		if len(nodes) == 0 && len(sets) == 0 {
			return snapshotOfRead(guess, found, all), rollout.Fallback{}, nil
		}
		var (
			got     map[string]v2alpha1.Node
			w       workload
			why     rollout.Fallback
			nodeErr error
			setErr  error
			wg      sync.WaitGroup
		)
		var both bool
		wg.Go(func() { got, both, nodeErr = readNodes(ctx, fresh, namespace, nodes) })
		if len(sets) > 0 {
			wg.Go(func() { w, why, setErr = readCachedWorkload(ctx, cache, fresh, namespace, sets) })
		}
		wg.Wait()
		if !why.None() {
			return nil, why, nil
		}
		if err := errors.Join(nodeErr, setErr); err != nil {
			return nil, rollout.Fallback{}, err
		}
		if both {
			return nil, fallbackPodBoth, nil
		}
		for _, n := range nodes {
			read[n] = true
		}
		for _, n := range sets {
			readWorkloadOf[n] = true
		}
		for n, node := range got {
			found[n] = node
		}
		all.pods, all.sets = append(all.pods, w.pods...), append(all.sets, w.sets...)
		for m := range w.lost {
			if all.lost == nil {
				all.lost = map[string]bool{}
			}
			all.lost[m] = true
		}
		scope, few = rollout.PodScope(snapshotOfRead(guess, found, workload{}), name)
	}
	return nil, fallbackPodMoving, nil
}

// cachedNodes returns the cache's nodes of node name's tenant (no
// workload), nil when the cache holds no node called name.
func cachedNodes(ctx context.Context, cache client.Reader, namespace, name string) (*rollout.Snapshot, error) {
	var node v2alpha1.Node
	for _, n := range []v2alpha1.Node{&v2alpha1.Backend{}, &v2alpha1.Frontend{}} {
		err := cache.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, n)
		if err == nil {
			node = n
			break
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading %s/%s from the cache: %w", namespace, name, err)
		}
	}
	if node == nil {
		return nil, nil
	}
	tenant := rollout.Tenant{Namespace: namespace, ClusterName: node.NodeSpec().ClusterConfig.ClusterName}
	nodes, err := tenantNodes(ctx, cache, tenant)
	if err != nil {
		return nil, err
	}
	return &rollout.Snapshot{Tenant: tenant, Nodes: nodes}, nil
}

// readNodes reads each node of names by name, fresh, as a Backend and as a
// Frontend. A node not found is left out. Where a Backend and a Frontend
// share a name, both is true: which of them is the tenant's, or whether
// both are, only the read of the whole tenant tells as it does.
func readNodes(ctx context.Context, fresh client.Reader, namespace string, names []string) (out map[string]v2alpha1.Node, both bool, err error) {
	gets := make([]v2alpha1.Node, 0, 2*len(names))
	for range names {
		gets = append(gets, &v2alpha1.Backend{}, &v2alpha1.Frontend{})
	}
	found := make([]bool, len(gets))
	errs := make([]error, len(gets))
	var wg sync.WaitGroup
	for i, node := range gets {
		name := names[i/2]
		wg.Go(func() {
			err := fresh.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, node)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil:
				errs[i] = fmt.Errorf("reading %s %s/%s: %w", node.NodeKind(), namespace, name, err)
			default:
				found[i] = true
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, false, err
	}
	out = map[string]v2alpha1.Node{}
	for i, node := range gets {
		if found[i] {
			if _, ok := out[names[i/2]]; ok {
				both = true
			}
			out[names[i/2]] = node
		}
	}
	return out, both, nil
}

// snapshotOfRead is the snapshot of the nodes found and the workload read,
// in the tenant, orders, time and grouping of like.
func snapshotOfRead(like *rollout.Snapshot, found map[string]v2alpha1.Node, w workload) *rollout.Snapshot {
	s := rollout.SnapshotOf(w.objects(slices.Collect(maps.Values(found))), like.Tenant, like.Orders, like.Now)
	s.Grouping = like.Grouping
	return s
}
