package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

func TestAMachineDrawsTheViewAgainOnlyWhenItsReadinessChanges(t *testing.T) {
	machine := func(ready corev1.ConditionStatus, others ...corev1.NodeCondition) *corev1.Node {
		m := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "m", Labels: map[string]string{"zone": "a"}}}
		m.Status.Conditions = append([]corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready, Reason: "KubeletReady"}}, others...)
		m.Status.Images = []corev1.ContainerImage{{Names: []string{"express"}, SizeBytes: 1 << 30}}
		return m
	}
	kept := func(m *corev1.Node) any {
		out, err := machineReadiness(m)
		require.NoError(t, err)
		return out
	}
	for name, c := range map[string]struct {
		before, after *corev1.Node
		redraw        bool
	}{
		"a heartbeat changes nothing the view reads": {
			before: machine(corev1.ConditionTrue), after: machine(corev1.ConditionTrue, corev1.NodeCondition{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}),
		},
		"a machine turning not Ready draws it again": {
			before: machine(corev1.ConditionTrue), after: machine(corev1.ConditionUnknown), redraw: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			redrawn := false
			machineReadyChanged(kept(c.before), kept(c.after), func() { redrawn = true })
			assert.Equal(t, c.redraw, redrawn)
		})
	}
	m := kept(machine(corev1.ConditionTrue)).(*corev1.Node)
	assert.Equal(t, "m", m.Name)
	assert.Equal(t, []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}, m.Status.Conditions, "only the Ready condition is kept")
	assert.Empty(t, m.Status.Images)
	assert.Empty(t, m.Labels)
}

func TestOnlyStatefulSetsOfExpressPodsDrawTheViewAgain(t *testing.T) {
	set := func(labels map[string]string) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{}
		s.Spec.Template.Labels = labels
		return s
	}
	assert.True(t, ofExpressPods(set(map[string]string{v2alpha1.LabelNode: "acme-fe1"})))
	assert.False(t, ofExpressPods(set(map[string]string{"app": "postgres"})))
	assert.True(t, ofExpressPods("a deletion seen late"))
}

// A user who may list but not watch gets an error from status -w, at once,
// instead of a view that never comes.
func TestStatusWatchRefusedAWatchSaysSo(t *testing.T) {
	kubeconfig := cluster(t)
	statusFixtures(t)
	ctx := context.Background()
	c := shared.Get(t).Client
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "status-lister"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{v2alpha1.GroupVersion.Group}, Resources: []string{"backends", "frontends"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{""}, Resources: []string{"pods", "nodes", "configmaps"}, Verbs: []string{"get", "list"}},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"get", "list"}},
	}}
	require.NoError(t, c.Create(ctx, role))
	require.NoError(t, c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "status-lister"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "lister"}}}))

	out, _, err := run(t, "", "status", "--kubeconfig", kubeconfig, "-n", "status-done", "--as", "lister")
	require.NoError(t, err, "without -w, listing is enough")
	assert.Contains(t, out, "1 tenants: 0 stuck, 0 held, 0 rolling, 1 done")
	_, _, err = run(t, "", "status", "-w", "--kubeconfig", kubeconfig, "-n", "status-done", "--as", "lister")
	assert.ErrorContains(t, err, "reading namespace status-done")
	assert.ErrorContains(t, err, "forbidden")
}
