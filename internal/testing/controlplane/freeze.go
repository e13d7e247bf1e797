package controlplane

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// Freeze makes a ValidatingAdmissionPolicy refuse, until the test ends,
// every update of the nodes named in namespace ns ("<name> is frozen", as
// a policy of the cluster's may), and waits until it does.
func Freeze(t *testing.T, c client.Client, ns string, nodes ...v2alpha1.Node) {
	t.Helper()
	ctx := context.Background()
	var names []string
	for _, n := range nodes {
		names = append(names, n.GetName())
	}
	list, _ := json.Marshal(names) // strings always marshal
	policy := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-frozen"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
					Rule:       admissionregistrationv1.Rule{APIGroups: []string{v2alpha1.GroupVersion.Group}, APIVersions: []string{"*"}, Resources: []string{"frontends", "backends"}},
				},
			}}},
			Validations: []admissionregistrationv1.Validation{{
				Expression:        "!(object.metadata.name in " + string(list) + ")",
				MessageExpression: "object.metadata.name + ' is frozen'",
			}},
		},
	}
	require.NoError(t, c.Create(ctx, policy))
	t.Cleanup(func() { _ = c.Delete(ctx, policy) })
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: ns + "-frozen"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        policy.Name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny},
			MatchResources: &admissionregistrationv1.MatchResources{NamespaceSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}},
		},
	}
	require.NoError(t, c.Create(ctx, binding))
	t.Cleanup(func() { _ = c.Delete(ctx, binding) })
	for _, n := range nodes {
		require.Eventually(t, func() bool { // the policy takes effect once the API server has loaded it
			got := v2alpha1.NewNode(n.NodeKind())
			require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(n), got))
			got.GetAnnotations()["example.com/probe"] = time.Now().String()
			return c.Update(ctx, got) != nil
		}, 30*time.Second, 100*time.Millisecond, "the policy refuses updates of %s", n.GetName())
	}
}
