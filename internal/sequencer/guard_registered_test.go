package sequencer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestWhetherAWebhookJudgesEveryRelease(t *testing.T) {
	updates := func(resource string) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{Resources: []string{resource}},
		}}
	}
	prod := map[string]string{"team": "payments"}
	for name, c := range map[string]struct {
		webhook  admissionregistrationv1.ValidatingWebhook
		resource string
		why      string
	}{
		"a webhook as generated judges every update": {
			webhook: admissionregistrationv1.ValidatingWebhook{FailurePolicy: ptr.To(admissionregistrationv1.Fail), Rules: updates("frontends")}, resource: "frontends",
		},
		"a webhook that fails open does not": {
			webhook: admissionregistrationv1.ValidatingWebhook{FailurePolicy: ptr.To(admissionregistrationv1.Ignore), Rules: updates("frontends")}, resource: "frontends",
			why: "lets writes through when it cannot be reached (failurePolicy Ignore)",
		},
		"a webhook whose rules leave updates out does not": {
			webhook: admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{Resources: []string{"backends"}},
			}}}, resource: "backends",
			why: "does not judge updates of backends",
		},
		"a webhook for every operation and resource judges them": {
			webhook: admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
				Rule:       admissionregistrationv1.Rule{Resources: []string{"*"}},
			}}}, resource: "backends",
		},
		"a webhook on some nodes only does not": {
			webhook:  admissionregistrationv1.ValidatingWebhook{Rules: updates("backends"), ObjectSelector: &metav1.LabelSelector{MatchLabels: prod}},
			resource: "backends", why: "selects only some objects (objectSelector)",
		},
		"a webhook on some writes only does not": {
			webhook:  admissionregistrationv1.ValidatingWebhook{Rules: updates("backends"), MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "some", Expression: "false"}}},
			resource: "backends", why: "judges only some writes (matchConditions)",
		},
		"the pod webhook's own selection of Express pods is the guard's": {
			webhook: admissionregistrationv1.ValidatingWebhook{Rules: updates("pods"),
				ObjectSelector:  &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "express.medallia.com/node", Operator: metav1.LabelSelectorOpExists}}},
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "held-by-the-sequencer", Expression: "true"}}},
			resource: "pods",
		},
		"a webhook that selects the namespace judges it": {
			webhook:  admissionregistrationv1.ValidatingWebhook{Rules: updates("frontends"), NamespaceSelector: &metav1.LabelSelector{MatchLabels: prod}},
			resource: "frontends",
		},
		"a webhook that leaves the namespace out does not": {
			webhook:  admissionregistrationv1.ValidatingWebhook{Rules: updates("frontends"), NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "search"}}},
			resource: "frontends", why: "does not select the namespace (namespaceSelector)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, c.why, judgesEvery(c.webhook, c.resource, prod))
		})
	}
}
