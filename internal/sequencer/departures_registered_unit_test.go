package sequencer

import (
	"testing"

	"github.com/stretchr/testify/assert"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestWhetherAWebhookIsSentEveryDeletionOfANode(t *testing.T) {
	ops := func(o ...admissionregistrationv1.OperationType) []admissionregistrationv1.RuleWithOperations {
		return []admissionregistrationv1.RuleWithOperations{{Operations: o,
			Rule: admissionregistrationv1.Rule{APIGroups: []string{"express.medallia.com"}, APIVersions: []string{"v2alpha1"}, Resources: []string{"frontends"}}}}
	}
	url := func(path string) admissionregistrationv1.WebhookClientConfig {
		u := "https://127.0.0.1:9443" + path
		return admissionregistrationv1.WebhookClientConfig{URL: &u}
	}
	const path = "/validate-express-medallia-com-v2alpha1-frontend"
	generated := admissionregistrationv1.ValidatingWebhook{FailurePolicy: ptr.To(admissionregistrationv1.Fail), ClientConfig: url(path),
		Rules: ops(admissionregistrationv1.Create, admissionregistrationv1.Update, admissionregistrationv1.Delete)}
	with := func(edit func(*admissionregistrationv1.ValidatingWebhook)) admissionregistrationv1.ValidatingWebhook {
		w := *generated.DeepCopy()
		edit(&w)
		return w
	}
	for _, c := range []struct {
		name    string
		webhook admissionregistrationv1.ValidatingWebhook
		why     string
	}{
		{"a webhook as generated is sent every deletion", generated, ""},
		{"a webhook sent every operation is sent every deletion", with(func(w *admissionregistrationv1.ValidatingWebhook) {
			w.Rules = ops(admissionregistrationv1.OperationAll)
		}), ""},
		{"a webhook whose rules leave deletions out is not", with(func(w *admissionregistrationv1.ValidatingWebhook) {
			w.Rules = ops(admissionregistrationv1.Create, admissionregistrationv1.Update)
		}), "is not sent deletions of frontends (express.medallia.com/v2alpha1)"},
		{"a webhook whose rules leave updates out misses moves to another tenant", with(func(w *admissionregistrationv1.ValidatingWebhook) {
			w.Rules = ops(admissionregistrationv1.Create, admissionregistrationv1.Delete)
		}), "is not sent updates (a move to another tenant) of frontends (express.medallia.com/v2alpha1)"},
		{"a webhook whose rules name another resource is not", with(func(w *admissionregistrationv1.ValidatingWebhook) { w.Rules[0].Resources = []string{"backends"} }),
			"is not sent deletions of frontends (express.medallia.com/v2alpha1); is not sent updates (a move to another tenant) of frontends (express.medallia.com/v2alpha1)"},
		{"a webhook that fails open lets deletions through undated", with(func(w *admissionregistrationv1.ValidatingWebhook) {
			w.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		}), "lets deletions through when it cannot be reached (failurePolicy Ignore)"},
		{"a webhook with match conditions is sent only some writes", with(func(w *admissionregistrationv1.ValidatingWebhook) {
			w.MatchConditions = []admissionregistrationv1.MatchCondition{{Name: "creates", Expression: "request.operation == 'CREATE'"}}
		}), "is sent only some writes (matchConditions)"},
		{"a webhook with an object selector selects only some objects", with(func(w *admissionregistrationv1.ValidatingWebhook) {
			w.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "web"}}
		}), "selects only some objects (objectSelector)"},
		{"a webhook sending its reviews elsewhere dates nothing", with(func(w *admissionregistrationv1.ValidatingWebhook) { w.ClientConfig = url("/validate") }),
			`sends its reviews to "/validate", not to ` + path},
		{"a webhook wrong in two ways says both", with(func(w *admissionregistrationv1.ValidatingWebhook) {
			w.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
			w.Rules = ops(admissionregistrationv1.Update)
		}), "lets deletions through when it cannot be reached (failurePolicy Ignore); is not sent deletions of frontends (express.medallia.com/v2alpha1)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.why, datesEvery(c.webhook, "frontends", path))
		})
	}
}
