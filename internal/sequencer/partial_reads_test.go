package sequencer_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// A fresh read that RBAC forbids StatefulSets and machines goes on without
// them, as docs/operations.md says, and counts each once in
// express_sequencer_fresh_reads_partial_total, which the chart alerts on: a
// once-per-process log line is too easy to miss.
func TestAFreshReadWithoutStatefulSetsOrMachinesIsCounted(t *testing.T) {
	be := &v2alpha1.Backend{ObjectMeta: metav1.ObjectMeta{Name: "acme-be", Namespace: "tenant"}}
	be.Spec.ClusterConfig.ClusterName = "acme"
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "acme-be-0", Namespace: "tenant", Labels: map[string]string{v2alpha1.LabelNode: "acme-be"}},
		Spec:       corev1.PodSpec{NodeName: "machine-1"},
		Status:     corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	other := pod.DeepCopy()
	other.Name, other.Spec.NodeName = "acme-be-1", "machine-2"
	forbidden := func(what string) error {
		return apierrors.NewForbidden(schema.GroupResource{Resource: what}, "", nil)
	}
	r := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(be, pod, other).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			switch list.(type) {
			case *appsv1.StatefulSetList:
				return forbidden("statefulsets")
			case *corev1.NodeList:
				return forbidden("nodes")
			}
			return c.List(ctx, list, opts...)
		},
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			if _, ok := obj.(*corev1.Node); ok {
				return forbidden("nodes")
			}
			return c.Get(ctx, key, obj, opts...)
		},
	}).Build()
	sets, machines := sequencer.PartialReads("statefulsets"), sequencer.PartialReads("machines")

	snap, err := sequencer.GatherFresh(context.Background(), r, rollout.Tenant{Namespace: "tenant", ClusterName: "acme"}, defaults.Builtin(), time.Now(), 0, rollout.Grouping{})
	require.NoError(t, err, "the read goes on")
	assert.Len(t, snap.Pods["acme-be"], 2)
	assert.Equal(t, sets+1, sequencer.PartialReads("statefulsets"), "without the StatefulSets")
	assert.Equal(t, machines+1, sequencer.PartialReads("machines"), "without the machines its Ready pods run on: one read, counted once")
}
