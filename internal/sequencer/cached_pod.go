package sequencer

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/medallia/express-sequencer/internal/rollout"
)

// cachedPod is what the sequencer's cache keeps of an Express pod: what
// the plan reads of it, in a type of its own. A corev1.Pod is 1,192 bytes
// of struct however little is set in it, and its conditions 120 bytes
// each; this keeps the same fields in about a third.
//
// The cache hands out copies: controller-runtime's reads copy each object
// they return (DeepCopyObject) into the type asked for. A cachedPod's copy
// is the *corev1.Pod it keeps, so every read of pods — a Get, a List by
// index — gets a corev1.Pod as before, holding exactly what stripPod kept
// (keptPod). Event handlers see the cachedPod itself, as a client.Object:
// its metadata as kept (its labels whole, of its annotations the two
// would-hold ones). (client-go's cache mutation detector,
// KUBE_CACHE_MUTATION_DETECTOR, compares an object with its copy, and
// would take every cached pod for mutated: it is a test aid, not run
// here.)
type cachedPod struct {
	metav1.ObjectMeta
	typeMeta   metav1.TypeMeta
	nodeName   string
	gates      []corev1.PodSchedulingGate
	phase      corev1.PodPhase
	conditions []podCondition
	// failing is the container whose state makes the pod failing
	// (failingContainers), none otherwise.
	failing []corev1.ContainerStatus
}

// podCondition is what the plan reads of a pod condition.
type podCondition struct {
	Type   corev1.PodConditionType
	Status corev1.ConditionStatus
}

// GetObjectKind is the kind the pod was decoded with, as a corev1.Pod's.
func (c *cachedPod) GetObjectKind() schema.ObjectKind { return &c.typeMeta }

// DeepCopyObject is the pod as the plan reads it, a *corev1.Pod of its
// own: what the cache's reads hand out.
func (c *cachedPod) DeepCopyObject() runtime.Object { return c.pod() }

// pod is c as a corev1.Pod, sharing none of c's maps or slices (its
// strings are immutable).
func (c *cachedPod) pod() *corev1.Pod {
	p := &corev1.Pod{TypeMeta: c.typeMeta, ObjectMeta: *c.ObjectMeta.DeepCopy()}
	p.Spec.NodeName = c.nodeName
	if c.gates != nil {
		p.Spec.SchedulingGates = append([]corev1.PodSchedulingGate{}, c.gates...)
	}
	p.Status.Phase = c.phase
	if c.conditions != nil {
		p.Status.Conditions = make([]corev1.PodCondition, len(c.conditions))
		for i, cond := range c.conditions {
			p.Status.Conditions[i] = corev1.PodCondition{Type: cond.Type, Status: cond.Status}
		}
	}
	for _, s := range c.failing {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, *s.DeepCopy())
	}
	return p
}

// newCachedPod keeps of p what the plan reads, sharing the strings pods
// repeat (intern).
func newCachedPod(p *corev1.Pod) *cachedPod {
	c := &cachedPod{
		typeMeta: p.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: p.Name, Namespace: intern(p.Namespace), UID: p.UID, ResourceVersion: p.ResourceVersion,
			Labels: internedMap(p.Labels, sharedPodLabels), DeletionTimestamp: p.DeletionTimestamp,
			Annotations: rollout.WouldHoldAnnotations(p.Annotations),
			// Whether the pod belongs to its node as it is now, not to an
			// earlier node of the same name (rollout.CurrentPods).
			CreationTimestamp: p.CreationTimestamp, OwnerReferences: p.OwnerReferences,
		},
		// The machine: a scoped read reads it with the pod (GatherScoped).
		nodeName: p.Spec.NodeName, gates: p.Spec.SchedulingGates,
		phase: p.Status.Phase, failing: failingContainers(p),
	}
	for i := range c.OwnerReferences {
		o := &c.OwnerReferences[i]
		o.APIVersion, o.Kind, o.Name = intern(o.APIVersion), intern(o.Kind), intern(o.Name)
	}
	// Of the conditions, only type and status are read.
	if p.Status.Conditions != nil {
		c.conditions = make([]podCondition, len(p.Status.Conditions))
		for i, cond := range p.Status.Conditions {
			c.conditions[i] = podCondition{Type: corev1.PodConditionType(intern(string(cond.Type))), Status: corev1.ConditionStatus(intern(string(cond.Status)))}
		}
	}
	return c
}

// stripPod keeps of an Express pod, in the cache, what the plan reads
// (cachedPod).
func stripPod(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	return newCachedPod(p), nil
}

// keptPod is p as the cache's reads hand it out: what the plan reads of
// it.
func keptPod(p *corev1.Pod) *corev1.Pod { return newCachedPod(p).pod() }

// failingContainers keeps, of a pod's container statuses, the state of one
// that makes the pod failing (rollout.FailingContainer), none otherwise: a
// failed pod needs none.
func failingContainers(p *corev1.Pod) []corev1.ContainerStatus {
	c, failing := rollout.FailingContainer(p)
	if !failing || p.Status.Phase == corev1.PodFailed {
		return nil
	}
	return []corev1.ContainerStatus{{Name: c.Name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: c.State.Waiting.Reason}}}}
}
