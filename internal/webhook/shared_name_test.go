package webhook_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/webhook"
)

// Frontend acme-fe1 of tenant acme is recovering (released on its target,
// its pod lost) while its provisioning predecessor acme-be is not Ready: a
// new pod of acme-fe1 is created scheduling-gated, and a (stale)
// sequencer's removal of that gate does not stand. Another tenant's
// Backend called acme-fe1 (two nodes the validating webhook, reading its
// cache, let in at once, or made before it was installed) changes nothing:
// the pod names its node by name alone, so it is judged as the Frontend's
// and as the Backend's, and held (a shared name holds its pods).
func TestAPodIsNotJudgedAsAnotherTenantsNodeOfItsName(t *testing.T) {
	for _, clash := range []bool{false, true} {
		name := "no clash"
		if clash {
			name = "a Backend of tenant zzz named acme-fe1"
		}
		t.Run(name, func(t *testing.T) {
			objs := recoveringFe1(clash)
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()

			// The pod webhook.
			gate := &webhook.PodGate{Reader: c, Orders: defaults.Builtin(), Clock: clock.RealClock{}, DefaultMode: v2alpha1.ModeEnforce}
			pod := fe1Pod(nil)
			resp := gate.Handle(context.Background(), sharedNamePodRequest(t, admissionv1.Create, pod, nil, "system:serviceaccount:kube-system:statefulset-controller"))
			require.True(t, resp.Allowed, resp.Result)
			assert.NotEmpty(t, resp.Patches,
				"a pod of acme-fe1 was admitted without the sequencer's scheduling gate while its provisioning predecessor acme-be is not Ready")

			// The release guard judging a (stale) sequencer's removal of the gate.
			guard := &webhook.PodGateGuard{Sequencer: []string{"express-sequencer"}, Releases: &webhook.ReleaseGuard{
				Reader: c, Orders: defaults.Builtin(), Clock: clock.RealClock{}, DefaultMode: v2alpha1.ModeEnforce}}
			held := fe1Pod([]corev1.PodSchedulingGate{{Name: v2alpha1.GateSequencer}})
			freed := fe1Pod(nil)
			require.NoError(t, c.Create(context.Background(), held))
			resp = guard.Handle(context.Background(), sharedNamePodRequest(t, admissionv1.Update, freed, held, "express-sequencer"))
			assert.False(t, resp.Allowed,
				"the removal of acme-fe1-0's gate stood while acme-be is not Ready")
			if clash {
				assert.Contains(t, resp.Result.Message, "a Backend and a Frontend of the namespace are both called acme-fe1")
			} else {
				assert.Contains(t, resp.Result.Message, "acme-be")
			}
		})
	}
}

func sharedNamePodRequest(t *testing.T, op admissionv1.Operation, obj, old *corev1.Pod, user string) admission.Request {
	raw := func(p *corev1.Pod) runtime.RawExtension {
		if p == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(p)
		require.NoError(t, err)
		return runtime.RawExtension{Raw: b}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "r", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		Name: obj.Name, Namespace: "tenant", Operation: op, Object: raw(obj), OldObject: raw(old),
		UserInfo: authenticationv1.UserInfo{Username: user},
	}}
}

func fe1Pod(gates []corev1.PodSchedulingGate) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1-0", Namespace: "tenant", UID: "fe1-0-b",
			Labels:          map[string]string{v2alpha1.LabelNode: "acme-fe1", v2alpha1.LabelTargetHash: "h1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "acme-fe1", UID: "set-fe1", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{SchedulingGates: gates, Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
}

func recoveringFe1(clash bool) []client.Object {
	early := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	node := func(n v2alpha1.Node, name, cluster string, uid types.UID) v2alpha1.Node {
		n.SetName(name)
		n.SetNamespace("tenant")
		n.SetUID(uid)
		n.SetCreationTimestamp(early)
		n.SetAnnotations(map[string]string{v2alpha1.AnnotationTargetHash: "h1", v2alpha1.AnnotationReleasedTarget: "h1"})
		n.NodeSpec().ClusterConfig.ClusterName = cluster
		n.NodeStatus().Conditions = []metav1.Condition{{Type: v2alpha1.ConditionPrerequisitesReady, Status: metav1.ConditionTrue,
			Reason: v2alpha1.ReasonRolloutComplete, Message: "Ready", ObservedGeneration: 1, LastTransitionTime: early}}
		return n
	}
	set := func(name string, owner v2alpha1.Node) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant", UID: types.UID("set-" + name[len("acme-"):]), CreationTimestamp: early,
				OwnerReferences: []metav1.OwnerReference{{APIVersion: v2alpha1.GroupVersion.String(), Kind: owner.NodeKind(), Name: name, UID: owner.GetUID(), Controller: ptr.To(true)}}},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](1), Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v2alpha1.LabelNode: name, v2alpha1.LabelTargetHash: "h1"}}}},
			Status: appsv1.StatefulSetStatus{Replicas: 1},
		}
	}
	be := node(&v2alpha1.Backend{}, "acme-be", "acme", "uid-be")
	fe1 := node(&v2alpha1.Frontend{}, "acme-fe1", "acme", "uid-fe1")
	be0 := &corev1.Pod{ // acme-be crashed: its pod is not Ready
		ObjectMeta: metav1.ObjectMeta{Name: "acme-be-0", Namespace: "tenant", UID: "be-0", CreationTimestamp: early,
			Labels:          map[string]string{v2alpha1.LabelNode: "acme-be", v2alpha1.LabelTargetHash: "h1"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "acme-be", UID: "set-be", Controller: ptr.To(true)}}},
		Spec:   corev1.PodSpec{NodeName: "machine-1", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}},
	}
	machine := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "machine-1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenant", Labels: map[string]string{v2alpha1.LabelSequencing: v2alpha1.ModeEnforce}}}
	objs := []client.Object{ns, machine, be, fe1, set("acme-be", be), set("acme-fe1", fe1), be0}
	if clash {
		other := node(&v2alpha1.Backend{}, "acme-fe1", "zzz", "uid-zzz-be")
		other.SetCreationTimestamp(metav1.NewTime(early.Add(-time.Minute)))
		objs = append(objs, other)
	}
	return objs
}

// A Backend whose name a Frontend took an instant before — created, not yet
// in the validating webhook's cache — is refused on a read by name from the
// API server, naming the field and the Frontend.
func TestANodeIsRefusedANameTheOtherKindTookBeforeTheCacheSawIt(t *testing.T) {
	cache := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	fe := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-be", Namespace: "tenant"}}
	fe.Spec.ClusterConfig.ClusterName = "acme"
	fresh := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(fe).Build()
	be := &v2alpha1.Backend{ObjectMeta: metav1.ObjectMeta{Name: "acme-be", Namespace: "tenant"}}
	be.Spec.ClusterConfig.ClusterName = "acme"
	v := &webhook.Validator[*v2alpha1.Backend]{Reader: cache, Orders: defaults.Builtin()}
	_, err := v.ValidateCreate(context.Background(), be)
	require.NoError(t, err, "the cache has not seen the Frontend")
	v.Fresh = fresh
	_, err = v.ValidateCreate(context.Background(), be)
	require.Error(t, err)
	assert.Contains(t, err.Error(), `metadata.name: Invalid value: "acme-be": a Frontend named acme-be already exists in namespace tenant`)
}
