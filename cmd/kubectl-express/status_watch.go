package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// fleetCache is what status -w reads the fleet from: an informer of each
// kind the view reads, filled by one LIST and kept current by its watch,
// so that drawing the view again costs kube-apiserver nothing — where
// reading the fleet again for every burst of changes would list tens of
// megabytes a second during a fleet-wide rollout. Kinds this user may not
// list (StatefulSets, Nodes) are answered with the API server's Forbidden,
// as a read straight from it would be, instead of an informer that never
// fills.
type fleetCache struct {
	cache.Cache
	forbidden map[string]error
}

// startFleetCache starts the informers of namespace ns (every namespace
// when empty) until ctx ends, calls changed on each event that can change
// the view, and returns once every informer holds its first LIST. A list
// or watch the API server refuses (Forbidden, Unauthorized) ends them and
// is sent on the channel returned; other failures are retried, as
// kubectl get -w does.
func startFleetCache(ctx context.Context, cfg *rest.Config, c client.Reader, ns string, changed func()) (client.Reader, <-chan error, error) {
	express, err := labels.NewRequirement(v2alpha1.LabelNode, selection.Exists, nil)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	refused := make(chan error, 1)
	opts := cache.Options{
		Scheme:           scheme.New(),
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:  {Label: labels.NewSelector().Add(*express)},
			&corev1.Node{}: {Transform: machineReadiness},
			// What the sequencer's cache keeps of a node, as the plan reads.
			&v2alpha1.Backend{}:  {Transform: sequencer.StripNode},
			&v2alpha1.Frontend{}: {Transform: sequencer.StripNode},
		},
		DefaultWatchErrorHandler: func(ctx context.Context, r *toolscache.Reflector, err error) {
			toolscache.DefaultWatchErrorHandler(ctx, r, err)
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				select {
				case refused <- err:
				default:
				}
				cancel()
			}
		},
		// A kind read that has no informer here fails, rather than
		// starting one that nothing draws the view again for.
		ReaderFailOnMissingInformer: true,
	}
	if ns != "" {
		opts.DefaultNamespaces = map[string]cache.Config{ns: {}}
	}
	fc := &fleetCache{forbidden: map[string]error{}}
	if fc.Cache, err = cache.New(cfg, opts); err != nil {
		cancel()
		return nil, nil, err
	}
	// An informer of a kind this user may not list would never fill: each
	// kind is listed once first (one item). What the view cannot do
	// without fails here, as a read straight from the API server would;
	// what it can (StatefulSets, machines) is answered Forbidden later.
	var objects []client.Object
	for _, kind := range []struct {
		what     string
		obj      client.Object
		list     client.ObjectList
		opts     []client.ListOption
		optional bool
	}{
		{"Backends in " + where(ns), &v2alpha1.Backend{}, &v2alpha1.BackendList{}, []client.ListOption{client.InNamespace(ns)}, false},
		{"Frontends in " + where(ns), &v2alpha1.Frontend{}, &v2alpha1.FrontendList{}, []client.ListOption{client.InNamespace(ns)}, false},
		{"the Express pods in " + where(ns), &corev1.Pod{}, &corev1.PodList{}, []client.ListOption{client.InNamespace(ns), client.HasLabels{v2alpha1.LabelNode}}, false},
		{"StatefulSets in " + where(ns), &appsv1.StatefulSet{}, &appsv1.StatefulSetList{}, []client.ListOption{client.InNamespace(ns)}, true},
		{"Nodes", &corev1.Node{}, &corev1.NodeList{}, nil, true},
	} {
		switch err := c.List(ctx, kind.list, append(kind.opts, client.Limit(1))...); {
		case err == nil:
			objects = append(objects, kind.obj)
		case kind.optional && apierrors.IsForbidden(err):
			fc.forbidden[fmt.Sprintf("%T", kind.list)] = err
			fc.forbidden[fmt.Sprintf("%T", kind.obj)] = err
		default:
			cancel()
			return nil, nil, fmt.Errorf("listing %s: %w", kind.what, err)
		}
	}
	handler := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { changed() },
		UpdateFunc: func(any, any) { changed() },
		DeleteFunc: func(any) { changed() },
	}
	for _, obj := range objects {
		informer, err := fc.GetInformer(ctx, obj)
		if err != nil {
			cancel()
			return nil, nil, err
		}
		var h toolscache.ResourceEventHandler = handler
		switch obj.(type) {
		case *corev1.Node:
			// Machines report in all the time: only one that comes, goes
			// or changes its Ready condition can change the view.
			h = toolscache.ResourceEventHandlerFuncs{
				AddFunc:    func(any) { changed() },
				UpdateFunc: func(before, after any) { machineReadyChanged(before, after, changed) },
				DeleteFunc: func(any) { changed() },
			}
		case *appsv1.StatefulSet:
			h = toolscache.FilteringResourceEventHandler{FilterFunc: ofExpressPods, Handler: handler}
		}
		if _, err := informer.AddEventHandler(h); err != nil {
			cancel()
			return nil, nil, err
		}
	}
	go func() { _ = fc.Start(ctx) }()
	if !fc.WaitForCacheSync(ctx) {
		cancel()
		select {
		case err := <-refused:
			return nil, nil, fmt.Errorf("reading %s: %w", where(ns), err)
		default:
			return nil, nil, fmt.Errorf("reading %s into a cache: %w", where(ns), ctx.Err())
		}
	}
	return fc, refused, nil
}

// machineReadiness keeps of a machine (a Node) only what the view reads:
// its name and its Ready condition.
func machineReadiness(in any) (any, error) {
	m, ok := in.(*corev1.Node)
	if !ok {
		return in, nil
	}
	out := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: m.Name, ResourceVersion: m.ResourceVersion, UID: m.UID}}
	for _, c := range m.Status.Conditions {
		if c.Type == corev1.NodeReady {
			out.Status.Conditions = []corev1.NodeCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return out, nil
}

// machineReadyChanged calls changed when a machine's Ready condition did.
func machineReadyChanged(before, after any, changed func()) {
	b, okB := before.(*corev1.Node)
	a, okA := after.(*corev1.Node)
	if !okB || !okA || !equality.Semantic.DeepEqual(b.Status.Conditions, a.Status.Conditions) {
		changed()
	}
}

// ofExpressPods reports whether a StatefulSet makes Express pods (its pod
// template carries express.medallia.com/node); the view reads no other.
func ofExpressPods(obj any) bool {
	set, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return true // a deletion seen late: let the view be drawn again
	}
	_, express := set.Spec.Template.Labels[v2alpha1.LabelNode]
	return express
}

func (f *fleetCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := f.forbidden[fmt.Sprintf("%T", list)]; err != nil {
		return err
	}
	return f.Cache.List(ctx, list, opts...)
}

func (f *fleetCache) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := f.forbidden[fmt.Sprintf("%T", obj)]; err != nil {
		return err
	}
	return f.Cache.Get(ctx, key, obj, opts...)
}
