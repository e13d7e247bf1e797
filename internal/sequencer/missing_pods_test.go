package sequencer_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// The fresh snapshot a release is planned on counts the pods a node's
// StatefulSet wants and does not have yet (one being created after the
// others, or replaced), read from the real API server: with OrderedReady a
// StatefulSet's first pods are Ready long before its last exists. Pods of a
// ReplicaSet are taken as they are (its Deployment scales it as it goes).
func TestTheFreshSnapshotCountsThePodsANodesControllerStillWants(t *testing.T) {
	h := apiServer.Get(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "missing-"}}
	require.NoError(t, h.Client.Create(ctx, ns))
	for _, n := range []v2alpha1.Node{
		&v2alpha1.Backend{ObjectMeta: metav1.ObjectMeta{Name: "acme-be", Namespace: ns.Name}},
		&v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Namespace: ns.Name}},
	} {
		n.NodeSpec().ClusterConfig.ClusterName = "acme"
		n.NodeSpec().ExpressVersion = "express-e689.151"
		require.NoError(t, h.Client.Create(ctx, n))
	}
	labels := func(node string) map[string]string { return map[string]string{v2alpha1.LabelNode: node} }
	template := func(node string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: labels(node)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "express", Image: "express"}}},
		}
	}
	sts := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "acme-be", Namespace: ns.Name},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](3), Selector: &metav1.LabelSelector{MatchLabels: labels("acme-be")}, Template: template("acme-be")},
	}
	require.NoError(t, h.Client.Create(ctx, sts))
	rs := &appsv1.ReplicaSet{
		ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1-5d8f", Namespace: ns.Name},
		Spec:       appsv1.ReplicaSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels("acme-fe1")}, Template: template("acme-fe1")},
	}
	require.NoError(t, h.Client.Create(ctx, rs))
	pod := func(name, node string, owner client.Object, kind string) {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name, Labels: labels(node)},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "express", Image: "express"}}},
		}
		if owner != nil {
			p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: kind, Name: owner.GetName(), UID: owner.GetUID(), Controller: ptr.To(true)}}
		}
		require.NoError(t, h.Client.Create(ctx, p))
	}
	missing := func() map[string]int {
		t.Helper()
		s, err := sequencer.GatherFresh(ctx, h.Client, rollout.Tenant{Namespace: ns.Name, ClusterName: "acme"}, defaults.Builtin(), time.Now(), 0, rollout.Grouping{})
		require.NoError(t, err)
		return s.MissingPods
	}

	// Another tenant in the namespace, its StatefulSet one pod short: not
	// this tenant's business, and not read for it.
	other := &v2alpha1.Backend{ObjectMeta: metav1.ObjectMeta{Name: "other-be", Namespace: ns.Name}}
	other.Spec.ClusterConfig.ClusterName = "other"
	require.NoError(t, h.Client.Create(ctx, other))
	otherSTS := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "other-be", Namespace: ns.Name},
		Spec:       appsv1.StatefulSetSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels("other-be")}, Template: template("other-be")},
	}
	require.NoError(t, h.Client.Create(ctx, otherSTS))
	pod("other-be-0", "other-be", otherSTS, "StatefulSet")

	pod("acme-be-0", "acme-be", sts, "StatefulSet")
	pod("acme-be-1", "acme-be", sts, "StatefulSet")
	pod("acme-fe1-5d8f-a", "acme-fe1", rs, "ReplicaSet")
	assert.Equal(t, map[string]int{"acme-be": 1}, missing(), "two of be's three pods exist; fe1's ReplicaSet is not counted")

	pod("acme-be-2", "acme-be", sts, "StatefulSet")
	pod("acme-fe1-5d8f-b", "acme-fe1", rs, "ReplicaSet")
	assert.Empty(t, missing(), "every pod the StatefulSet wants exists")

	require.NoError(t, h.Client.Get(ctx, client.ObjectKeyFromObject(sts), sts))
	sts.Spec.Replicas = ptr.To[int32](4)
	require.NoError(t, h.Client.Update(ctx, sts))
	assert.Equal(t, map[string]int{"acme-be": 1}, missing(), "scaled up: the new pod is wanted")

	require.NoError(t, h.Client.Delete(ctx, sts))
	require.NoError(t, h.Client.Create(ctx, &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "acme-be", Namespace: ns.Name}, Spec: *sts.Spec.DeepCopy()}))
	assert.Equal(t, map[string]int{"acme-be": 4}, missing(),
		"a StatefulSet created again under the same name is another controller: the old one's pods are not its own, and it wants all of its own")

	require.NoError(t, h.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns.Name), client.MatchingLabels{v2alpha1.LabelNode: "acme-be"}))
	require.Eventually(t, func() bool { return missing()["acme-be"] == 4 }, 10*time.Second, 50*time.Millisecond,
		"every pod gone, none created yet: the node's StatefulSet (named by its template) still wants them all")

	pod("acme-fe1-orphan", "acme-fe1", &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "gone", UID: "0d8e1c1e"}}, "StatefulSet")
	for i := range 3 {
		pod(fmt.Sprintf("acme-fe1-plain-%d", i), "acme-fe1", nil, "")
	}
	assert.NotContains(t, missing(), "acme-fe1", "pods of a StatefulSet that no longer exists, and pods of no controller, want nothing more")
}
