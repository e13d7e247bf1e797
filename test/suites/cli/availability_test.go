package cli

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// failurePolicy: Fail means no node is ever admitted without its defaults and
// gate: while no webhook serves, writes are refused with an error that says
// why; once one serves again, the same create succeeds with defaults.
func TestWhileNoWebhookServesWritesAreRefusedAndNothingSlipsThrough(t *testing.T) {
	cp, err := controlplane.Start()
	require.NoError(t, err)
	defer func() { assert.NoError(t, cp.Stop()) }()

	be := func() *v2alpha1.Backend {
		return &v2alpha1.Backend{
			ObjectMeta: metav1.ObjectMeta{Name: "acme-be", Namespace: metav1.NamespaceDefault},
			Spec:       v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "acme"}},
		}
	}
	err = cp.Client.Create(context.Background(), be())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `failed calling webhook "mbackend.express.medallia.com"`)
	assert.Contains(t, err.Error(), "connection refused")

	// The pod webhook fails closed too, for Express pods only: their
	// controllers retry until a replica serves, rather than scheduling out
	// of order; every other pod of the cluster is created as usual.
	expressPod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1-0", Namespace: metav1.NamespaceDefault, Labels: map[string]string{v2alpha1.LabelNode: "acme-fe1"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "express", Image: "express"}}},
	}
	err = cp.Client.Create(context.Background(), expressPod.DeepCopy())
	require.Error(t, err)
	assert.Contains(t, err.Error(), `failed calling webhook "mpod.express.medallia.com"`)
	ordinary := expressPod.DeepCopy()
	ordinary.Name, ordinary.Labels = "ordinary", map[string]string{"app": "ordinary"}
	require.NoError(t, cp.Client.Create(context.Background(), ordinary), "a pod without the node label never waits for express-sequencer")

	// express-sequencer comes back as an identity bound to exactly its
	// generated ClusterRole: enough to inject its CA bundle and to read the
	// nodes the validating webhook checks.
	data, err := os.ReadFile(filepath.Join(controlplane.Root(), "config", "rbac", "role.yaml"))
	require.NoError(t, err)
	role := &rbacv1.ClusterRole{}
	require.NoError(t, yaml.Unmarshal(data, role))
	require.NoError(t, cp.Client.Create(context.Background(), role))
	user, err := cp.Env.AddUser(envtest.User{Name: "express-sequencer"}, cp.Config)
	require.NoError(t, err)
	require.NoError(t, cp.Client.Create(context.Background(), &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "express-sequencer"}},
	}))
	_, stop, err := cp.StartManagerAs(user.Config(), cp.ManagerOptions(t.TempDir(), logr.Discard()))
	require.NoError(t, err)
	defer stop()
	created := be()
	require.NoError(t, cp.Client.Create(context.Background(), created))
	assert.NotNil(t, created.Spec.DeploymentDependencies, "defaults injected")
	assert.True(t, v2alpha1.IsGated(created), "gated")
	require.NoError(t, cp.Client.Create(context.Background(), expressPod), "an Express pod is admitted once a replica serves")
}
