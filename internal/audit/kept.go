package audit

import (
	"fmt"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// What the auditor's watches keep of each object: the fields its handlers
// read, in types of the auditor's own for pods and StatefulSets (a
// corev1.Pod is 1,192 bytes of struct and an appsv1.StatefulSet 1,288,
// however little is set in them) and as a typed node for Backends and
// Frontends (the unstructured maps of a node cost more than the node).
// The watches decode the whole object; the transform keeps this of it
// before the informer's cache does.

// keptPod is what the auditor keeps of a pod: its identity, auditedLabels
// and the StatefulSet revision it was made from, the controller of its
// owners, its would-hold and would-release-at annotations and creation
// time, and whether it is as created.
type keptPod struct {
	metav1.ObjectMeta
	// asCreated: neither the scheduler nor a kubelet has written its status
	// (asCreated).
	asCreated bool
}

// keptSet is what the auditor keeps of a StatefulSet: its identity, its
// controller, what its template makes pods for, its revisions and
// whether its controller has acted on its spec.
type keptSet struct {
	metav1.ObjectMeta
	// templateLabels are its pod template's auditedLabels.
	templateLabels  map[string]string
	current, update string
	// unobserved: status.observedGeneration is behind metadata.generation.
	unobserved bool
}

// stripNode keeps of a node what nodeSeen reads: its identity, the three
// audited annotations, its gates and up, its version and revision, and its
// PrerequisitesReady condition, as a typed node. A node's other
// annotations (its rollout history, what its release relied on) are most
// of its size. A node that does not decode is kept as it came, and not
// audited (onNode says so). kind is the watch's: a list's items need not
// name theirs.
func stripNode(kind string) toolscache.TransformFunc {
	return func(o any) (any, error) { return stripNodeOf(kind, o), nil }
}

func stripNodeOf(kind string, o any) any {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return o
	}
	n, err := decodeNode(kind, u)
	if err != nil {
		return o
	}
	return n
}

// decodeNode is the node of kind u is, decoded from only the fields the
// auditor reads; the error says why it does not decode.
func decodeNode(kind string, u *unstructured.Unstructured) (v2alpha1.Node, error) {
	n := v2alpha1.NewNode(kind)
	if n == nil {
		return nil, fmt.Errorf("%q is not a kind of Express node", kind)
	}
	// Only the audited fields are decoded: the whole node's maps are not
	// walked twice.
	small := &unstructured.Unstructured{Object: map[string]any{}}
	// The version and revision name the node's target on the contract's
	// fallback labels (NodeSeen.Key).
	for _, field := range []string{"rolloutGates", "up", "expressVersion", "deploymentRevision"} {
		if v, ok, _ := unstructured.NestedFieldNoCopy(u.Object, "spec", field); ok {
			_ = unstructured.SetNestedField(small.Object, v, "spec", field)
		}
	}
	conds, _, _ := unstructured.NestedFieldNoCopy(u.Object, "status", "conditions")
	list, _ := conds.([]any)
	for _, c := range list {
		if m, ok := c.(map[string]any); ok && m["type"] == v2alpha1.ConditionPrerequisitesReady {
			_ = unstructured.SetNestedField(small.Object, []any{m}, "status", "conditions")
		}
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(small.Object, n); err != nil {
		return nil, err
	}
	n.SetName(u.GetName())
	n.SetNamespace(u.GetNamespace())
	n.SetUID(u.GetUID())
	n.SetResourceVersion(u.GetResourceVersion())
	n.SetDeletionTimestamp(u.GetDeletionTimestamp())
	n.SetAnnotations(pick(u.GetAnnotations(), auditedAnnotations...))
	return n, nil
}

// auditedAnnotations are the annotations of a node the auditor reads.
var auditedAnnotations = []string{v2alpha1.AnnotationTargetHash, v2alpha1.AnnotationReleasedTarget, v2alpha1.AnnotationReleasedAt}

// nodeOf is the node of kind o is, as the auditor keeps it: o itself, or
// o stripped (an object as a watch decodes it, as tests feed it); the
// error says why one does not decode (the cache keeps it as it came).
func nodeOf(kind string, o any) (v2alpha1.Node, error) {
	switch o := o.(type) {
	case v2alpha1.Node:
		return o, nil
	case *unstructured.Unstructured:
		return decodeNode(kind, o)
	}
	return nil, fmt.Errorf("%T is not an Express node", o)
}

func stripPod(o any) (any, error) {
	p, ok := o.(*corev1.Pod)
	if !ok {
		return o, nil
	}
	return &keptPod{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, UID: p.UID, ResourceVersion: p.ResourceVersion,
		Labels: withRevision(p.Labels), OwnerReferences: controllerOnly(p.OwnerReferences), CreationTimestamp: p.CreationTimestamp,
		Annotations: pick(p.Annotations, v2alpha1.AnnotationWouldHoldPod, v2alpha1.AnnotationWouldReleaseAt)},
		asCreated: asCreated(p)}, nil
}

// podOf is the pod o is, as the auditor keeps it (o itself, or o
// stripped).
func podOf(o any) (*keptPod, bool) { return keptAs[*keptPod](stripPod, o) }

func stripSet(o any) (any, error) {
	s, ok := o.(*appsv1.StatefulSet)
	if !ok {
		return o, nil
	}
	return &keptSet{ObjectMeta: metav1.ObjectMeta{Name: s.Name, Namespace: s.Namespace, UID: s.UID, ResourceVersion: s.ResourceVersion,
		Generation: s.Generation, OwnerReferences: controllerOnly(s.OwnerReferences)},
		templateLabels: auditedLabels(s.Spec.Template.Labels),
		current:        s.Status.CurrentRevision, update: s.Status.UpdateRevision,
		unobserved: s.Status.ObservedGeneration < s.Generation}, nil
}

// setOf is the StatefulSet o is, as the auditor keeps it (o itself, or o
// stripped).
func setOf(o any) (*keptSet, bool) { return keptAs[*keptSet](stripSet, o) }

// keptAs is o as the auditor keeps it, T: o itself, or o stripped by strip
// (an object as a watch decodes it, as tests feed it).
func keptAs[T any](strip toolscache.TransformFunc, o any) (T, bool) {
	o, _ = strip(o)
	k, ok := o.(T)
	return k, ok
}

func stripNamespace(o any) (any, error) {
	ns, ok := o.(*corev1.Namespace)
	if !ok {
		return o, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, ResourceVersion: ns.ResourceVersion, Labels: ns.Labels}}, nil
}

// withRevision is a pod's auditedLabels and the StatefulSet revision it
// was made from.
func withRevision(labels map[string]string) map[string]string {
	out := auditedLabels(labels)
	if r, ok := labels[appsv1.ControllerRevisionHashLabelKey]; ok {
		if out == nil {
			out = map[string]string{}
		}
		out[appsv1.ControllerRevisionHashLabelKey] = r
	}
	return out
}

// auditedLabels keeps, of a pod's (or pod template's) labels, those the
// auditor reads: the node's, and what it was made for (TargetKey). The
// watch of StatefulSets holds every one of the cluster.
func auditedLabels(labels map[string]string) map[string]string {
	return pick(labels, v2alpha1.LabelNode, v2alpha1.LabelTargetHash, v2alpha1.LabelExpressVersion, v2alpha1.LabelDeploymentRevision)
}

// pick keeps, of m, the entries of keys; nil when it has none. (The
// auditor imports nothing of the planner's package, not even this.)
func pick(m map[string]string, keys ...string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

// controllerOnly keeps, of owner references, the controller's.
func controllerOnly(refs []metav1.OwnerReference) []metav1.OwnerReference {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return []metav1.OwnerReference{{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID, Controller: r.Controller}}
		}
	}
	return nil
}
