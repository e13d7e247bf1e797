package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/conformance"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
)

// The kit run as a user RBAC lets list the pods but not watch them:
// rolls-labelled, which watches the pods through a version change, cannot
// be judged. The clause is an error, not a failure of the operator (which
// honours the contract), and its reason names the permission; the run's
// result is error.
func TestAClauseTheKitsOwnAccessKeepsItFromJudgingIsAnErrorNotAFailure(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t, expressoperator.Breakage{})
	const user = "conformance-kit-without-pod-watch"
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get"}},
			{APIGroups: []string{v2alpha1.GroupVersion.Group}, Resources: []string{"backends", "frontends"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"apps"}, Resources: []string{"statefulsets"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list"}},
		},
	}
	require.NoError(t, harness.Client.Create(ctx, role))
	defer func() { _ = harness.Client.Delete(context.WithoutCancel(ctx), role) }()
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: user}},
	}
	require.NoError(t, harness.Client.Create(ctx, binding))
	defer func() { _ = harness.Client.Delete(context.WithoutCancel(ctx), binding) }()
	kit, err := harness.Env.AddUser(envtest.User{Name: user}, harness.Config)
	require.NoError(t, err)

	report, err := conformance.Check(ctx, conformance.Config{
		RESTConfig: kit.Config(), Namespace: ns, HoldWindow: 4 * time.Second, UnactedField: unacted,
		Clauses: []string{"rolls-labelled"},
	})
	require.NoError(t, err)
	c, ok := report.Clause("rolls-labelled")
	require.True(t, ok)
	assert.Equal(t, conformance.Errored, c.Result, c.Reason)
	assert.Contains(t, c.Reason, "forbidden")
	assert.Contains(t, c.Reason, `cannot watch resource "pods"`)
	assert.Equal(t, conformance.RunError, report.Summary.Result)
	assert.False(t, report.Failed(), "the operator failed nothing")
}
