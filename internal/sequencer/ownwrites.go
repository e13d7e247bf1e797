package sequencer

import (
	"context"
	"errors"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// ownWrites remembers the objects the sequencer itself wrote last, as the
// API server returned them, until the cache has caught up with them. A
// tenant is planned on the cache with these laid over it, so that a cache
// that has not seen the sequencer's own last writes yet does not make it
// write the same thing again, or explain a wait the sequencer has already
// ended. Releases do not rest on it: a plan that releases a node or a pod is
// made again from fresh reads (Reconciler.plan) — the cache also lags
// everyone else's writes, and an answer to the sequencer's own write can be
// lost.
//
// Newer is decided by resourceVersion, which the API server's etcd storage
// keeps as an increasing integer. Where one is not an integer the overlay
// reports errUncomparable, and the tenant is read fresh from the API server
// instead.
type ownWrites struct {
	mu   sync.Mutex
	objs map[ownKey]ownWrite
	// byTenant indexes objs by tenant, so that a tenant's pass looks at its
	// own writes only.
	byTenant map[rollout.Tenant]map[ownKey]bool
}

type ownKey struct{ kind, namespace, name string }

type ownWrite struct {
	obj    client.Object
	tenant rollout.Tenant
}

// errUncomparable says a resourceVersion is not an integer: the overlay
// cannot tell which of the cache and the sequencer's own write is newer.
var errUncomparable = errors.New("resourceVersions are not comparable")

const kindPod = "Pod"

func keyOf(obj client.Object) (ownKey, bool) {
	var kind string
	switch obj.(type) {
	case *v2alpha1.Backend:
		kind = v2alpha1.KindBackend
	case *v2alpha1.Frontend:
		kind = v2alpha1.KindFrontend
	case *corev1.Pod:
		kind = kindPod
	default:
		return ownKey{}, false
	}
	return ownKey{kind, obj.GetNamespace(), obj.GetName()}, true
}

// remember keeps obj, the API server's answer to a write of one of tenant's
// objects, until the cache has it or something newer.
func (w *ownWrites) remember(t rollout.Tenant, obj client.Object) {
	k, ok := keyOf(obj)
	if !ok || obj.GetResourceVersion() == "" {
		return
	}
	if p, ok := obj.(*corev1.Pod); ok {
		obj = keptPod(p) // as the cache's reads hand it out
	} else if n, ok := obj.DeepCopyObject().(v2alpha1.Node); ok {
		stripped, _ := StripNode(n) // as the cache keeps it
		obj = stripped.(v2alpha1.Node)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.objs == nil {
		w.objs, w.byTenant = map[ownKey]ownWrite{}, map[rollout.Tenant]map[ownKey]bool{}
	}
	if cur, ok := w.objs[k]; ok && cur.obj.GetUID() == obj.GetUID() {
		if newer, ok := newerVersion(cur.obj.GetResourceVersion(), obj.GetResourceVersion()); ok && newer {
			return // answers of concurrent writes may come back out of order
		}
	}
	w.forgetLocked(k)
	w.objs[k] = ownWrite{obj: obj, tenant: t}
	if w.byTenant[t] == nil {
		w.byTenant[t] = map[ownKey]bool{}
	}
	w.byTenant[t][k] = true
}

// forgetLocked drops the write of k, if any; w.mu is held.
func (w *ownWrites) forgetLocked(k ownKey) {
	own, ok := w.objs[k]
	if !ok {
		return
	}
	delete(w.objs, k)
	delete(w.byTenant[own.tenant], k)
	if len(w.byTenant[own.tenant]) == 0 {
		delete(w.byTenant, own.tenant)
	}
}

// newerVersion reports whether resourceVersion a is newer than b, and
// whether the two could be compared at all.
func newerVersion(a, b string) (newer, ok bool) {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	if errA != nil || errB != nil {
		return false, false
	}
	return x > y, true
}

// overlay returns the sequencer's own later write of cached, an object read
// from the cache, or nil when the cache is as new; it forgets writes the
// cache has caught up with.
func (w *ownWrites) overlay(cached client.Object) (client.Object, error) {
	k, known := keyOf(cached)
	if !known {
		return nil, nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	own, found := w.objs[k]
	if !found {
		return nil, nil
	}
	if own.obj.GetUID() != cached.GetUID() {
		w.forgetLocked(k) // deleted and created again since: the cache has the new one
		return nil, nil
	}
	newer, ok := newerVersion(own.obj.GetResourceVersion(), cached.GetResourceVersion())
	switch {
	case !ok:
		return nil, errUncomparable
	case !newer:
		w.forgetLocked(k)
		return nil, nil
	}
	return own.obj.DeepCopyObject().(client.Object), nil
}

// overlayList replaces, in a list read from the cache, every object the
// sequencer wrote since with its own write.
func (w *ownWrites) overlayList(list client.ObjectList) error {
	switch l := list.(type) {
	case *v2alpha1.BackendList:
		return overlayItems(w, l.Items)
	case *v2alpha1.FrontendList:
		return overlayItems(w, l.Items)
	case *corev1.PodList:
		return overlayItems(w, l.Items)
	}
	return nil
}

func overlayItems[T any, PT interface {
	*T
	client.Object
}](w *ownWrites, items []T) error {
	for i := range items {
		own, err := w.overlay(PT(&items[i]))
		if err != nil {
			return err
		}
		if own != nil {
			items[i] = *own.(PT)
		}
	}
	return nil
}

// forgetGone drops the remembered writes of the snapshot's tenant whose
// objects the snapshot no longer holds: deleted before the cache caught up.
func (w *ownWrites) forgetGone(s *rollout.Snapshot) {
	pods := map[string]bool{}
	for _, ps := range s.Pods {
		for _, p := range ps {
			pods[p.Name] = true
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k := range w.byTenant[s.Tenant] {
		n, isNode := s.Nodes[k.name]
		if k.kind == kindPod && !pods[k.name] || k.kind != kindPod && (!isNode || n.NodeKind() != k.kind) {
			w.forgetLocked(k)
		}
	}
}

// size is how many writes the overlay holds.
func (w *ownWrites) size() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.objs)
}

// withOwnWrites is a reader of the cache that lays the sequencer's own
// writes over what it lists.
type withOwnWrites struct {
	client.Reader
	own *ownWrites
}

func (r withOwnWrites) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := r.Reader.List(ctx, list, opts...); err != nil {
		return err
	}
	return r.own.overlayList(list)
}
