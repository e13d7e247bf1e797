package sequencer

import (
	"context"
	"fmt"
	"slices"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Guard names the release guard's webhooks: a scoped read (GatherScoped)
// leaves the read of the whole tenant to them, so the sequencer plans on it
// only where they are registered to judge every release it writes — the
// guard is configuration the sequencer does not own (a validating webhook
// configuration edited or deleted, a namespace left out of its selector).
type Guard struct {
	// Configuration is the ValidatingWebhookConfiguration that holds them.
	Configuration string
	// Webhooks are its webhooks that judge a release, by the resource whose
	// writes they judge (backends, frontends, pods).
	Webhooks map[string]string
}

// WhyNotGuarded starts the reason a scoped read gives for a namespace whose
// releases the guard would not judge.
const WhyNotGuarded = "the release guard does not judge every release here: "

// notJudging returns why the guard's webhooks, as registered now (read
// through r, the API server itself), would not judge every release the sequencer
// writes in namespace ns; "" when they would: each is registered, fails
// closed, judges updates of its resource, selects every object, and its
// namespaceSelector selects ns.
func (g Guard) notJudging(ctx context.Context, r client.Reader, ns string) (string, error) {
	if g.Configuration == "" || len(g.Webhooks) == 0 {
		return WhyNotGuarded + "no release guard is configured", nil
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	switch err := r.Get(ctx, client.ObjectKey{Name: g.Configuration}, &cfg); {
	case apierrors.IsNotFound(err):
		return WhyNotGuarded + fmt.Sprintf("ValidatingWebhookConfiguration %s does not exist", g.Configuration), nil
	case err != nil:
		return "", fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", g.Configuration, err)
	}
	var namespace corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: ns}, &namespace); err != nil {
		return "", fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	resources := make([]string, 0, len(g.Webhooks))
	for resource := range g.Webhooks {
		resources = append(resources, resource)
	}
	slices.Sort(resources)
	for _, resource := range resources {
		name := g.Webhooks[resource]
		i := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool { return w.Name == name })
		if i < 0 {
			return WhyNotGuarded + fmt.Sprintf("%s has no webhook %s", g.Configuration, name), nil
		}
		if why := judgesEvery(cfg.Webhooks[i], resource, namespace.Labels); why != "" {
			return WhyNotGuarded + fmt.Sprintf("webhook %s of %s %s", name, g.Configuration, why), nil
		}
	}
	return "", nil
}

// judgesEvery returns why webhook w would leave an update of resource in a
// namespace labelled nsLabels unjudged, "" when it judges every one (a
// pod's objectSelector, which selects Express pods, is the guard's own).
func judgesEvery(w admissionregistrationv1.ValidatingWebhook, resource string, nsLabels map[string]string) string {
	if w.FailurePolicy != nil && *w.FailurePolicy != admissionregistrationv1.Fail {
		return "lets writes through when it cannot be reached (failurePolicy " + string(*w.FailurePolicy) + ")"
	}
	if !slices.ContainsFunc(w.Rules, func(r admissionregistrationv1.RuleWithOperations) bool {
		return slices.ContainsFunc(r.Operations, func(op admissionregistrationv1.OperationType) bool {
			return op == admissionregistrationv1.Update || op == admissionregistrationv1.OperationAll
		}) && slices.ContainsFunc(r.Resources, func(res string) bool { return res == resource || res == "*" })
	}) {
		return "does not judge updates of " + resource
	}
	if resource != "pods" && len(w.MatchConditions) > 0 {
		return "judges only some writes (matchConditions)"
	}
	if resource != "pods" && w.ObjectSelector != nil && (len(w.ObjectSelector.MatchLabels) > 0 || len(w.ObjectSelector.MatchExpressions) > 0) {
		return "selects only some objects (objectSelector)"
	}
	if w.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
		if err != nil || !sel.Matches(labels.Set(nsLabels)) {
			return "does not select the namespace (namespaceSelector)"
		}
	}
	return ""
}
