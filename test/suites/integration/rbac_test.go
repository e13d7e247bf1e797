package integration

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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

// The sequencer runs as an identity bound to exactly the generated
// ClusterRole (config/rbac/role.yaml): a whole rollout works, and anything
// beyond the role is forbidden.
// leastPrivilegeUser is the identity the sequencer of the RBAC test runs as.
const leastPrivilegeUser = "express-sequencer-test"

func TestTheSequencerNeedsNoMoreThanItsGeneratedRole(t *testing.T) {
	ctx := context.Background()
	data, err := os.ReadFile(filepath.Join(controlplane.Root(), "config", "rbac", "role.yaml"))
	require.NoError(t, err)
	role := &rbacv1.ClusterRole{}
	require.NoError(t, yaml.Unmarshal(data, role))
	role.Name = "express-sequencer-least-privilege-test"
	require.NoError(t, harness.Client.Create(ctx, role))
	user, err := harness.Env.AddUser(envtest.User{Name: leastPrivilegeUser}, harness.Config)
	require.NoError(t, err)
	require.NoError(t, harness.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: leastPrivilegeUser}},
	}))

	o := harness.ManagerOptions("", controlplane.TestLogger())
	o.Webhooks = false
	settings(&o)
	_, stop, err := harness.StartManagerAs(user.Config(), o)
	require.NoError(t, err)
	defer stop()

	ns, mark := settledTenant(t, 3)
	setVersion(t, ns, v2, keys(3)...)
	waitSettled(t, ns, 3)
	assert.Equal(t, "fe1 fe2 be", startedSince(ns, mark), "a full rollout works with the role alone")
	mark = len(startedIn(ns))
	evict(t, ns, keys(3)...)
	waitSettled(t, ns, 3)
	assert.Equal(t, "be fe1 fe2", startedSince(ns, mark), "a recovery at the pods (scheduling gates removed) works with the role alone")

	limited, err := client.New(user.Config(), client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	forbidden := map[string]error{
		"deleting a node":   limited.Delete(ctx, node(ns, "fe1")),
		"creating a node":   limited.Create(ctx, node(ns, "fe9")),
		"reading secrets":   limited.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)),
		"deleting a pod":    limited.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns)),
		"creating a pod":    limited.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "x", Image: "x"}}}}),
		"updating a pod":    limited.Update(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}}),
		"updating a node":   limited.Update(ctx, node(ns, "be")),
		"creating a secret": limited.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}}),
	}
	for what, err := range forbidden {
		assert.True(t, apierrors.IsForbidden(err), "%s is forbidden: %v", what, err)
	}
	var nodes v2alpha1.FrontendList
	assert.NoError(t, limited.List(ctx, &nodes, client.InNamespace(ns)), "reading nodes is allowed")
}
