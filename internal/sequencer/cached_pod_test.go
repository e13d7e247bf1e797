package sequencer

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// expressPod is an Express pod of tenant-0007's fe1 with everything a
// kubelet, the scheduler and the StatefulSet controller write on it.
func expressPod() *corev1.Pod {
	at := metav1.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	yes := true
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "tenant-0007-fe1-0", Namespace: "tenant-0007", UID: "p1", ResourceVersion: "42", CreationTimestamp: at,
			Labels:          map[string]string{v2alpha1.LabelNode: "tenant-0007-fe1", "controller-revision-hash": "tenant-0007-fe1-6d9f8c7b5"},
			Annotations:     map[string]string{v2alpha1.AnnotationWouldHoldPod: "waiting for tenant-0007-be", "prometheus.io/scrape": "true"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "tenant-0007-fe1", UID: "s1", Controller: &yes}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager"}}},
		Spec: corev1.PodSpec{NodeName: "machine-1", Hostname: "tenant-0007-fe1-0",
			Containers: []corev1.Container{{Name: "express", Image: "registry.example/express:e689.154"}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", StartTime: &at,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at, Reason: "r", Message: "m"},
				{Type: "express.medallia.com/warm", Status: corev1.ConditionFalse, LastTransitionTime: at},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "express", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}}}},
	}
}

// What the cache keeps of a pod and hands out on a read: every field the
// plan reads, as it was, and nothing else.
func TestThePodTheCacheHandsOutHoldsWhatThePlanReads(t *testing.T) {
	now := metav1.Date(2026, 12, 2, 10, 5, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		change func(p *corev1.Pod)
	}{
		{"a pod running and ready", func(*corev1.Pod) {}},
		{"a pod scheduling-gated on no machine", func(p *corev1.Pod) {
			p.Spec.NodeName, p.Status.Phase = "", corev1.PodPending
			p.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v2alpha1.GateSequencer}}
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonSchedulingGated}}
			p.Status.ContainerStatuses = nil
		}},
		{"a pod whose container crash-loops", func(p *corev1.Pod) {
			p.Status.Conditions[0].Status = corev1.ConditionFalse
			p.Status.ContainerStatuses[0].Ready = false
			p.Status.ContainerStatuses[0].RestartCount = 7
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off"}}
		}},
		{"a pod that failed", func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodFailed
			p.Status.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}}
		}},
		{"a pod being deleted", func(p *corev1.Pod) { p.DeletionTimestamp = &now }},
		{"a pod with no status yet", func(p *corev1.Pod) { p.Status = corev1.PodStatus{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := expressPod()
			tc.change(p)
			stored, err := stripPod(p.DeepCopy())
			require.NoError(t, err)
			// What controller-runtime's cache does on a List: copy each
			// object and set the copies as the list's items.
			var list corev1.PodList
			require.NoError(t, apimeta.SetList(&list, []runtime.Object{stored.(runtime.Object).DeepCopyObject()}))
			require.Len(t, list.Items, 1)
			got := &list.Items[0]

			assert.Equal(t, p.TypeMeta, got.TypeMeta)
			assert.Equal(t, p.Name, got.Name)
			assert.Equal(t, p.Namespace, got.Namespace)
			assert.Equal(t, p.UID, got.UID)
			assert.Equal(t, p.ResourceVersion, got.ResourceVersion)
			assert.Equal(t, p.Labels, got.Labels)
			assert.Equal(t, rollout.WouldHoldAnnotations(p.Annotations), got.Annotations)
			assert.Equal(t, p.OwnerReferences, got.OwnerReferences)
			assert.Equal(t, p.CreationTimestamp, got.CreationTimestamp)
			assert.Equal(t, p.DeletionTimestamp, got.DeletionTimestamp)
			assert.Equal(t, p.Spec.NodeName, got.Spec.NodeName)
			assert.Equal(t, p.Spec.SchedulingGates, got.Spec.SchedulingGates)
			assert.Equal(t, p.Status.Phase, got.Status.Phase)
			require.Len(t, got.Status.Conditions, len(p.Status.Conditions))
			for i, c := range p.Status.Conditions {
				assert.Equal(t, corev1.PodCondition{Type: c.Type, Status: c.Status}, got.Status.Conditions[i], "condition %s: its type and status", c.Type)
			}
			wantFailing, failing := rollout.FailingContainer(p)
			gotFailing, gotIs := rollout.FailingContainer(got)
			assert.Equal(t, failing && p.Status.Phase != corev1.PodFailed, gotIs, "failing as the pod is")
			if gotIs {
				assert.Equal(t, wantFailing.Name, gotFailing.Name)
				assert.Equal(t, wantFailing.State.Waiting.Reason, gotFailing.State.Waiting.Reason)
			}
			assert.Empty(t, got.ManagedFields)
			assert.Empty(t, got.Spec.Containers, "the pod's spec beyond its machine and gates is not kept")

			// Event handlers see the stored object: its metadata whole.
			obj, ok := stored.(client.Object)
			require.True(t, ok, "the cache's handlers take it as a client.Object")
			assert.Equal(t, p.Labels, obj.GetLabels())
			assert.Equal(t, p.Namespace+"/"+p.Name, obj.GetNamespace()+"/"+obj.GetName())

			// Each read is a copy of its own.
			got.Labels["changed"] = "by a reader"
			if gotIs {
				got.Status.ContainerStatuses[0].State.Waiting.Reason = "changed by a reader"
			}
			got.Status.Conditions = append(got.Status.Conditions[:0], corev1.PodCondition{Type: "x"})
			again := stored.(runtime.Object).DeepCopyObject().(*corev1.Pod)
			assert.Equal(t, p.Labels, again.Labels, "a reader's change to its copy reaches no other")
			if len(p.Status.Conditions) > 0 {
				assert.Equal(t, p.Status.Conditions[0].Type, again.Status.Conditions[0].Type)
			}
			if gotIs {
				assert.Equal(t, wantFailing.State.Waiting.Reason, again.Status.ContainerStatuses[0].State.Waiting.Reason)
			}
		})
	}
}
