package sequencer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestWhetherAWebhookJudgesEveryRelease(t *testing.T) {
	rule := func(resource, group, version string) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{version}, Resources: []string{resource}},
		}
	}
	updates := func(resource string) []admissionregistrationv1.RuleWithOperations {
		if resource == "pods" {
			return []admissionregistrationv1.RuleWithOperations{rule(resource, "", "v1")}
		}
		return []admissionregistrationv1.RuleWithOperations{rule(resource, "express.medallia.com", "v2alpha1")}
	}
	expressPods := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "express.medallia.com/node", Operator: metav1.LabelSelectorOpExists}}}
	heldPods := []admissionregistrationv1.MatchCondition{{Name: "held-by-the-sequencer", Expression: "true"}}
	prod := map[string]string{"team": "payments"}
	for name, c := range map[string]struct {
		webhook  admissionregistrationv1.ValidatingWebhook
		resource string
		path     string // the guard's path for the resource; "" takes any
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
			why: "is not sent updates of backends (express.medallia.com/v2alpha1)",
		},
		"a webhook on another API group does not": {
			webhook: admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{rule("frontends", "example.com", "v2alpha1")}}, resource: "frontends",
			why: "is not sent updates of frontends (express.medallia.com/v2alpha1)",
		},
		"a webhook on another version does not": {
			webhook: admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{rule("frontends", "express.medallia.com", "v3")}}, resource: "frontends",
			why: "is not sent updates of frontends (express.medallia.com/v2alpha1)",
		},
		"a webhook on cluster-scoped objects only does not": {
			webhook: admissionregistrationv1.ValidatingWebhook{Rules: func() []admissionregistrationv1.RuleWithOperations {
				r := updates("pods")
				r[0].Scope = ptr.To(admissionregistrationv1.ClusterScope)
				return r
			}()}, resource: "pods",
			why: "is not sent updates of pods (v1)",
		},
		"a webhook for every operation and resource judges them": {
			webhook: admissionregistrationv1.ValidatingWebhook{Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{"*"}, APIVersions: []string{"*"}, Resources: []string{"*"}},
			}}}, resource: "backends",
		},
		"a webhook on some nodes only does not": {
			webhook:  admissionregistrationv1.ValidatingWebhook{Rules: updates("backends"), ObjectSelector: &metav1.LabelSelector{MatchLabels: prod}},
			resource: "backends", why: "selects only some objects (objectSelector)",
		},
		"a webhook on some writes only does not": {
			webhook:  admissionregistrationv1.ValidatingWebhook{Rules: updates("backends"), MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "some", Expression: "false"}}},
			resource: "backends", why: "is sent only some writes (matchConditions)",
		},
		"the pod webhook's own selection of Express pods is the guard's": {
			webhook:  admissionregistrationv1.ValidatingWebhook{Rules: updates("pods"), ObjectSelector: expressPods, MatchConditions: heldPods},
			resource: "pods",
		},
		"a pod webhook that selects fewer pods does not": {
			webhook:  admissionregistrationv1.ValidatingWebhook{Rules: updates("pods"), ObjectSelector: &metav1.LabelSelector{MatchLabels: prod}, MatchConditions: heldPods},
			resource: "pods", why: "selects only some objects (objectSelector)",
		},
		"a pod webhook with a condition of its own does not": {
			webhook: admissionregistrationv1.ValidatingWebhook{Rules: updates("pods"), ObjectSelector: expressPods,
				MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "held-by-the-sequencer", Expression: "false"}}},
			resource: "pods", why: "is sent only some writes (matchConditions)",
		},
		"the guard's selection of pods is not a node webhook's": {
			webhook:  admissionregistrationv1.ValidatingWebhook{Rules: updates("frontends"), ObjectSelector: expressPods},
			resource: "frontends", why: "selects only some objects (objectSelector)",
		},
		"a webhook that selects the namespace judges it": {
			webhook:  admissionregistrationv1.ValidatingWebhook{Rules: updates("frontends"), NamespaceSelector: &metav1.LabelSelector{MatchLabels: prod}},
			resource: "frontends",
		},
		"a webhook that sends its reviews to another path does not": {
			webhook: admissionregistrationv1.ValidatingWebhook{Rules: updates("frontends"), ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Path: ptr.To("/validate")}}},
			resource: "frontends", path: "/guard-release-frontend", why: `sends its reviews to "/validate", not to /guard-release-frontend`,
		},
		"a webhook that sends its reviews to the guard's path judges them": {
			webhook: admissionregistrationv1.ValidatingWebhook{Rules: updates("frontends"), ClientConfig: admissionregistrationv1.WebhookClientConfig{
				Service: &admissionregistrationv1.ServiceReference{Path: ptr.To("/guard-release-frontend")}}},
			resource: "frontends", path: "/guard-release-frontend",
		},
		"a webhook that leaves the namespace out does not": {
			webhook:  admissionregistrationv1.ValidatingWebhook{Rules: updates("frontends"), NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "search"}}},
			resource: "frontends", why: "does not select the namespace (namespaceSelector)",
		},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, c.why, judgesEvery(c.webhook, c.resource, prod, PodSelection{ObjectSelector: expressPods, MatchConditions: heldPods}, c.path))
		})
	}
}

func TestAWebhooksReviewsGoToThePathOfItsServiceOrURL(t *testing.T) {
	assert.Equal(t, "/validate-v1-pod", pathOf(admissionregistrationv1.WebhookClientConfig{
		Service: &admissionregistrationv1.ServiceReference{Name: "webhook-service", Namespace: "system", Path: ptr.To("/validate-v1-pod")}}))
	assert.Equal(t, "/validate-v1-pod", pathOf(admissionregistrationv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:9443/validate-v1-pod")}))
	assert.Empty(t, pathOf(admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Name: "elsewhere"}}))
}
