package webhook_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// tenantUser returns a client for a user who may edit namespace ns and
// nothing else: what Kubernetes aggregates into its built-in edit role
// there — its own rules (system:aggregate-to-edit) and those
// express-sequencer adds (config/rbac/edit_view_roles.yaml) — bound
// directly, since no controller-manager aggregates roles here.
func tenantUser(t *testing.T, ns, name string) client.Client {
	t.Helper()
	ctx := context.Background()
	h := env(t)
	data, err := os.ReadFile(filepath.Join(controlplane.Root(), "config", "rbac", "edit_view_roles.yaml"))
	require.NoError(t, err)
	var aggregated *rbacv1.ClusterRole
	for _, doc := range strings.Split(string(data), "\n---") {
		role := &rbacv1.ClusterRole{}
		require.NoError(t, yaml.Unmarshal([]byte(doc), role))
		if role.Labels["rbac.authorization.k8s.io/aggregate-to-edit"] == "true" {
			aggregated = role
		}
	}
	require.NotNil(t, aggregated, "config/rbac/edit_view_roles.yaml aggregates into edit")
	aggregated.Name = "express-sequencer-edit-" + ns
	require.NoError(t, h.Client.Create(ctx, aggregated))
	for _, role := range []string{"system:aggregate-to-edit", aggregated.Name} {
		require.NoError(t, h.Client.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-" + role, Namespace: ns},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: name}},
		}))
	}
	user, err := h.Env.AddUser(envtest.User{Name: name}, h.Config)
	require.NoError(t, err)
	c, err := client.New(user.Config(), client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	return c
}

// What a user who may edit one tenant's namespace cannot do to the order,
// hers or another namespace's: each attempt made as her.
func TestAUserWhoMayEditOneNamespaceCannotBreakTheOrder(t *testing.T) {
	ctx := context.Background()
	admin := env(t).Client
	mine, theirs := namespace(t), namespace(t)
	alice := tenantUser(t, mine, "alice")

	fe1 := seedNode(mine, "fe1")
	assert.True(t, apierrors.IsForbidden(alice.Create(ctx, fe1)), "nodes are created by whoever deploys the tenant (Argo CD, Helm)")
	require.NoError(t, admin.Create(ctx, fe1))
	require.True(t, v2alpha1.IsGated(get(t, fe1)), "gated by the webhook")
	hash := get(t, fe1).GetAnnotations()[v2alpha1.AnnotationTargetHash]

	t.Run("she cannot release her node's gate", func(t *testing.T) {
		n := get(t, fe1)
		n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
		require.NoError(t, alice.Update(ctx, n))
		assert.True(t, v2alpha1.IsGated(get(t, fe1)), "the gate is put back")
	})

	t.Run("she cannot forge target-hash or released-*", func(t *testing.T) {
		n := get(t, fe1)
		n.GetAnnotations()[v2alpha1.AnnotationTargetHash] = "0000000000000000"
		n.GetAnnotations()[v2alpha1.AnnotationReleasedTarget] = hash
		n.GetAnnotations()[v2alpha1.AnnotationReleasedGeneration] = "1"
		n.GetAnnotations()[v2alpha1.AnnotationReleasedSetRevision] = "uid/rev"
		require.NoError(t, alice.Update(ctx, n))
		stored := get(t, fe1)
		assert.Equal(t, hash, stored.GetAnnotations()[v2alpha1.AnnotationTargetHash])
		for _, a := range []string{v2alpha1.AnnotationReleasedTarget, v2alpha1.AnnotationReleasedGeneration, v2alpha1.AnnotationReleasedSetRevision} {
			assert.NotContains(t, stored.GetAnnotations(), a)
		}
		assert.True(t, v2alpha1.IsGated(stored))
	})

	t.Run("she cannot release a pod's scheduling gate nor mark a pod Ready", func(t *testing.T) {
		p := pod(mine, "acme-fe1-0", map[string]string{v2alpha1.LabelNode: "acme-fe1"})
		require.NoError(t, alice.Create(ctx, p), "she may create pods")
		require.Contains(t, gates(p), v2alpha1.GateSequencer, "held: its Backend does not exist")
		p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == v2alpha1.GateSequencer })
		err := alice.Update(ctx, p, client.FieldOwner(v2alpha1.FieldManager))
		require.Error(t, err)
		assert.Contains(t, err.Error(), "is removed by express-sequencer only")

		ready := &corev1.Pod{}
		require.NoError(t, admin.Get(ctx, client.ObjectKeyFromObject(p), ready))
		ready.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		err = alice.Status().Update(ctx, ready)
		assert.True(t, apierrors.IsForbidden(err), "pod status is the kubelet's: %v", err)
	})

	t.Run("a Ready pod of hers naming another namespace's backend does not count for it", func(t *testing.T) {
		for _, n := range seedTenant(theirs)[:2] { // acme-be and acme-fe1, no pods
			require.NoError(t, admin.Create(ctx, n))
		}
		theirBE := get(t, seedNode(theirs, "be"))
		fake := pod(mine, "acme-be-0", map[string]string{v2alpha1.LabelNode: "acme-be",
			v2alpha1.LabelTargetHash: theirBE.GetAnnotations()[v2alpha1.AnnotationTargetHash]})
		require.NoError(t, alice.Create(ctx, fake))
		// As the kubelet would report a pod that runs.
		fake.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		require.NoError(t, admin.Status().Update(ctx, fake))

		theirFE1 := pod(theirs, "acme-fe1-0", map[string]string{v2alpha1.LabelNode: "acme-fe1"})
		require.NoError(t, admin.Create(ctx, theirFE1))
		assert.Contains(t, gates(theirFE1), v2alpha1.GateSequencer, "their fe1 waits for their own backend")
	})

	t.Run("her nodes neither hold nor refuse another namespace's", func(t *testing.T) {
		// In her namespace she makes acme-fe2 wait for acme-fe3, then
		// acme-fe3 for acme-fe2: a cycle, refused there.
		for _, k := range []string{"fe2", "fe3"} {
			require.NoError(t, admin.Create(ctx, seedNode(mine, k)))
		}
		setList := func(k, on string) error {
			n := get(t, seedNode(mine, k))
			n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{UpgradePrerequisites: upgradeOn(on)}
			return alice.Update(ctx, n)
		}
		require.NoError(t, setList("fe2", "acme-fe3"))
		err := setList("fe3", "acme-fe2")
		require.Error(t, err)
		assert.Contains(t, err.Error(), "is a cycle")
		// The other namespace's acme-fe3 waiting for its acme-fe2 meets
		// only that namespace's nodes: admitted (no cycle with hers).
		theirFE3 := seedNode(theirs, "fe3")
		theirFE3.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{UpgradePrerequisites: upgradeOn("acme-fe2")}
		require.NoError(t, admin.Create(ctx, theirFE3), "another namespace's nodes are none of her tenant's")
	})

	t.Run("she cannot touch the webhooks' registration", func(t *testing.T) {
		var hooks admissionregistrationv1.MutatingWebhookConfigurationList
		require.NoError(t, admin.List(ctx, &hooks))
		require.NotEmpty(t, hooks.Items)
		err := alice.Delete(ctx, &hooks.Items[0])
		assert.True(t, apierrors.IsForbidden(err), "%v", err)
	})
}
