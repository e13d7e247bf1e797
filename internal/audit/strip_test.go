package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

func TestTheAuditorKeepsOfANodeWhatItReadsAndNothingElse(t *testing.T) {
	n := &v2alpha1.Frontend{}
	n.SetName("acme-fe1")
	n.SetNamespace("acme")
	n.SetUID("u1")
	n.SetResourceVersion("42")
	kept := map[string]string{v2alpha1.AnnotationTargetHash: "v2", v2alpha1.AnnotationReleasedTarget: "v1", v2alpha1.AnnotationReleasedAt: "2026-11-28T10:00:00Z"}
	ann := map[string]string{v2alpha1.AnnotationRolloutHistory: `[{"target":"v0"}]`, "kubectl.kubernetes.io/last-applied-configuration": "{}"}
	for k, v := range kept {
		ann[k] = v
	}
	n.SetAnnotations(ann)
	n.Spec.ExpressVersion = "express-e689.154"
	n.Spec.DeploymentRevision = "r-7"
	n.Spec.ConfigChangeset = "tuned"
	n.Spec.AddGate(v2alpha1.GateSequencer)
	n.Status.Conditions = []metav1.Condition{
		{Type: v2alpha1.ConditionPrerequisitesReady, Status: metav1.ConditionFalse, Reason: v2alpha1.ReasonWaitingForPrerequisite, Message: "waiting for acme-be (Backend) to be Ready"},
		{Type: "Available", Status: metav1.ConditionTrue, Reason: "PodsReady", Message: "1/1 pods Ready"},
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(n)
	require.NoError(t, err)

	stripped, err := stripNode(v2alpha1.KindFrontend)(&unstructured.Unstructured{Object: raw})
	require.NoError(t, err)
	require.IsType(t, &v2alpha1.Frontend{}, stripped, "kept as a typed node")
	back := stripped.(*v2alpha1.Frontend)

	assert.Equal(t, kept, back.GetAnnotations())
	assert.Equal(t, "u1", string(back.GetUID()))
	assert.Equal(t, "acme-fe1", back.GetName())
	assert.Equal(t, "acme", back.GetNamespace())
	assert.Equal(t, "42", back.GetResourceVersion())
	assert.True(t, back.Spec.HasGate(v2alpha1.GateSequencer))
	assert.Equal(t, "express-e689.154", back.Spec.ExpressVersion, "the version names the target on the fallback labels")
	assert.Equal(t, "r-7", back.Spec.DeploymentRevision, "so does the revision")
	assert.Empty(t, back.Spec.ConfigChangeset, "the spec beyond gates, up, version and revision is dropped")
	require.Len(t, back.Status.Conditions, 1)
	assert.Equal(t, "waiting for acme-be (Backend) to be Ready", meta.FindStatusCondition(back.Status.Conditions, v2alpha1.ConditionPrerequisitesReady).Message)
}

func TestTheAuditorKeepsOfPodsAndStatefulSetsWhatItReads(t *testing.T) {
	yes := true
	labels := map[string]string{v2alpha1.LabelNode: "acme-fe1", v2alpha1.LabelTargetHash: "v2", v2alpha1.LabelExpressVersion: "express-e689.154",
		"controller-revision-hash": "acme-fe1-5d8", "statefulset.kubernetes.io/pod-name": "acme-fe1-0"}
	owners := []metav1.OwnerReference{{Kind: "Other", Name: "x"}, {Kind: "StatefulSet", Name: "acme-fe1", UID: "s1", Controller: &yes}}
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1-0", Namespace: "acme", Labels: labels, OwnerReferences: owners,
		Annotations: map[string]string{v2alpha1.AnnotationWouldHoldPod: "waiting for acme-be", "other": "x"}}}
	out, err := stripPod(p)
	require.NoError(t, err)
	pod := out.(*keptPod)
	want := map[string]string{v2alpha1.LabelNode: "acme-fe1", v2alpha1.LabelTargetHash: "v2", v2alpha1.LabelExpressVersion: "express-e689.154"}
	assert.Equal(t, map[string]string{v2alpha1.LabelNode: "acme-fe1", v2alpha1.LabelTargetHash: "v2", v2alpha1.LabelExpressVersion: "express-e689.154",
		"controller-revision-hash": "acme-fe1-5d8"}, pod.Labels, "a pod keeps the StatefulSet revision it was made from")
	assert.Equal(t, "v2", TargetKey(pod.Labels))
	assert.Equal(t, map[string]string{v2alpha1.AnnotationWouldHoldPod: "waiting for acme-be"}, pod.Annotations)
	if c := metav1.GetControllerOf(pod); assert.NotNil(t, c) {
		assert.Equal(t, "acme-fe1", c.Name)
	}
	assert.Len(t, pod.OwnerReferences, 1, "the controller only")
	assert.True(t, pod.asCreated, "no status written yet")
	p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
	if started, ok := podOf(p); assert.True(t, ok) {
		assert.False(t, started.asCreated, "its kubelet has written its status")
	}

	s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Namespace: "acme", OwnerReferences: owners}}
	s.Spec.Template.Labels = labels
	s.Status = appsv1.StatefulSetStatus{CurrentRevision: "acme-fe1-5d8", UpdateRevision: "acme-fe1-6c9", Replicas: 2, ReadyReplicas: 1}
	out, err = stripSet(s)
	require.NoError(t, err)
	set := out.(*keptSet)
	assert.Equal(t, want, set.templateLabels)
	assert.Equal(t, [2]string{"acme-fe1-5d8", "acme-fe1-6c9"}, [2]string{set.current, set.update}, "of its status, the revisions")
	assert.False(t, set.unobserved, "its controller has acted on its spec")
	assert.Equal(t, "acme-fe1", nodeOfSet(metav1.GetControllerOfNoCopy(set), set.templateLabels))
	s.Generation = 2
	s.Status.ObservedGeneration = 1
	if unobserved, ok := setOf(s); assert.True(t, ok) {
		assert.True(t, unobserved.unobserved, "its controller has not acted on generation 2")
	}
}

func TestANodeThatDoesNotDecodeIsKeptAsItCameAndNotAudited(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "express.medallia.com/v2alpha1", "kind": "Frontend",
		"metadata": map[string]any{"name": "acme-fe1", "namespace": "acme"}, "spec": map[string]any{"up": "yes"}}}
	out, err := stripNode(v2alpha1.KindFrontend)(u)
	require.NoError(t, err)
	assert.Same(t, u, out)
	_, err = nodeOf(v2alpha1.KindFrontend, u)
	assert.ErrorContains(t, err, "bool", "the error the auditor logs says what did not decode")
	_, err = nodeOf("Deployment", u)
	assert.ErrorContains(t, err, `"Deployment" is not a kind of Express node`)
}

func TestAStatefulSetIsNamedForTheNodeThatControlsItElseItsTemplatesNodeLabel(t *testing.T) {
	node := &metav1.OwnerReference{Kind: v2alpha1.KindFrontend, Name: "acme-fe1"}
	other := &metav1.OwnerReference{Kind: "ExpressSet", Name: "acme-set"}
	labelled := map[string]string{v2alpha1.LabelNode: "acme-fe2"}
	for name, c := range map[string]struct {
		controller *metav1.OwnerReference
		labels     map[string]string
		want       string
	}{
		"a node controls it: that node, whatever its template says": {node, labelled, "acme-fe1"},
		"something else controls it: the template's node label":     {other, labelled, "acme-fe2"},
		"no controller: the template's node label":                  {nil, labelled, "acme-fe2"},
		"neither: no node": {other, map[string]string{"app": "x"}, ""},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, c.want, nodeOfSet(c.controller, c.labels))
		})
	}
}
