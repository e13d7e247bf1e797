package sequencer

import (
	"context"
	"fmt"
	"net/url"
	"slices"

	"golang.org/x/sync/errgroup"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
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
	// Pods is how its pod webhook selects the pod updates it judges, as
	// shipped: a registration that selects fewer leaves a pod release
	// unjudged.
	Pods PodSelection
	// Paths are the paths the guard serves each webhook at, by resource: a
	// registration that sends the reviews elsewhere is no guard's.
	Paths map[string]string
}

// PodSelection is the objectSelector and matchConditions of the release
// guard's pod webhook.
type PodSelection struct {
	ObjectSelector  *metav1.LabelSelector
	MatchConditions []admissionregistrationv1.MatchCondition
}

// guardedResources are the API group and version of each resource whose
// releases the guard judges.
var guardedResources = map[string]schema.GroupVersion{
	"backends":  v2alpha1.GroupVersion,
	"frontends": v2alpha1.GroupVersion,
	"pods":      corev1.SchemeGroupVersion,
}

// WhyNotGuarded starts the reason a scoped read gives for a namespace whose
// releases the guard would not judge.
const WhyNotGuarded = "the release guard does not judge every release here: "

// notJudging returns why the guard's webhooks, as registered now (read
// through r, the API server itself), would not judge every release the sequencer
// writes in namespace ns; "" when they would: each is registered, fails
// closed, judges updates of its resource, selects every object, and its
// namespaceSelector selects ns, and ns is in enforce (def is the mode of a
// namespace without the sequencing label). The configuration and the
// namespace are read at the same time.
func (g Guard) notJudging(ctx context.Context, r client.Reader, ns, def string) (string, error) {
	if g.Configuration == "" || len(g.Webhooks) == 0 {
		return WhyNotGuarded + "no release guard is configured", nil
	}
	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	var namespace corev1.Namespace
	var missing bool
	var reads errgroup.Group
	reads.Go(func() error {
		switch err := r.Get(ctx, client.ObjectKey{Name: g.Configuration}, &cfg); {
		case apierrors.IsNotFound(err):
			missing = true
		case err != nil:
			return fmt.Errorf("reading ValidatingWebhookConfiguration %s: %w", g.Configuration, err)
		}
		return nil
	})
	reads.Go(func() error {
		if err := r.Get(ctx, client.ObjectKey{Name: ns}, &namespace); err != nil {
			return fmt.Errorf("reading namespace %s: %w", ns, err)
		}
		return nil
	})
	if err := reads.Wait(); err != nil {
		return "", err
	}
	if missing {
		return WhyNotGuarded + fmt.Sprintf("ValidatingWebhookConfiguration %s does not exist", g.Configuration), nil
	}
	if ModeOf(&namespace, def) != v2alpha1.ModeEnforce {
		return WhyNotGuarded + "the namespace is in audit mode", nil
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
		if why := judgesEvery(cfg.Webhooks[i], resource, namespace.Labels, g.Pods, g.Paths[resource]); why != "" {
			return WhyNotGuarded + fmt.Sprintf("webhook %s of %s %s", name, g.Configuration, why), nil
		}
	}
	return "", nil
}

// judgesEvery returns why webhook w would leave an update of resource in a
// namespace labelled nsLabels unjudged, "" when it judges every one: the
// first of what sentEvery finds, then its namespaceSelector. A pod webhook
// may select pods as the guard's own does (pods), no fewer.
func judgesEvery(w admissionregistrationv1.ValidatingWebhook, resource string, nsLabels map[string]string, pods PodSelection, path string) string {
	var own PodSelection
	if resource == "pods" {
		own = pods
	}
	updates := []sentOperation{{admissionregistrationv1.Update, "updates"}}
	if gaps := sentEvery(w, resource, updates, own, path, "writes"); len(gaps) > 0 {
		return gaps[0]
	}
	if w.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(w.NamespaceSelector)
		if err != nil || !sel.Matches(labels.Set(nsLabels)) {
			return "does not select the namespace (namespaceSelector)"
		}
	}
	return ""
}

// sentOperation is an operation a webhook must be sent, named for a
// message ("deletions").
type sentOperation struct {
	op   admissionregistrationv1.OperationType
	what string
}

// sentEvery lists what keeps webhook w from being sent every one of ops on
// resource, in the order checked: it fails open, a rule leaves one of ops
// out, matchConditions or an objectSelector narrower than own (the guard's
// own pod selection; none for nodes), or it sends its reviews elsewhere
// than path (when path is set). writes names what failing open lets
// through ("writes", "deletions"). Its namespaceSelector is the caller's.
func sentEvery(w admissionregistrationv1.ValidatingWebhook, resource string, ops []sentOperation, own PodSelection, path, writes string) []string {
	var gaps []string
	if w.FailurePolicy != nil && *w.FailurePolicy != admissionregistrationv1.Fail {
		gaps = append(gaps, "lets "+writes+" through when it cannot be reached (failurePolicy "+string(*w.FailurePolicy)+")")
	}
	gv := guardedResources[resource]
	for _, op := range ops {
		if !slices.ContainsFunc(w.Rules, func(r admissionregistrationv1.RuleWithOperations) bool { return covers(r, op.op, gv, resource) }) {
			gaps = append(gaps, fmt.Sprintf("is not sent %s of %s (%s)", op.what, resource, gv))
		}
	}
	if len(w.MatchConditions) > 0 && !equality.Semantic.DeepEqual(w.MatchConditions, own.MatchConditions) {
		gaps = append(gaps, "is sent only some writes (matchConditions)")
	}
	if !selectsAll(w.ObjectSelector) && !equality.Semantic.DeepEqual(w.ObjectSelector, own.ObjectSelector) {
		gaps = append(gaps, "selects only some objects (objectSelector)")
	}
	if got := pathOf(w.ClientConfig); path != "" && got != path {
		gaps = append(gaps, fmt.Sprintf("sends its reviews to %q, not to %s", got, path))
	}
	return gaps
}

// pathOf is the path a webhook's reviews are sent to.
func pathOf(c admissionregistrationv1.WebhookClientConfig) string {
	switch {
	case c.Service != nil && c.Service.Path != nil:
		return *c.Service.Path
	case c.URL != nil:
		if u, err := url.Parse(*c.URL); err == nil {
			return u.Path
		}
	}
	return ""
}

// covers reports whether rule r sends every operation op (an update, a
// deletion) of resource, of API group and version gv, in a namespace.
func covers(r admissionregistrationv1.RuleWithOperations, op admissionregistrationv1.OperationType, gv schema.GroupVersion, resource string) bool {
	anyOf := func(list []string, want ...string) bool {
		return slices.ContainsFunc(list, func(s string) bool { return slices.Contains(want, s) })
	}
	return slices.ContainsFunc(r.Operations, func(o admissionregistrationv1.OperationType) bool {
		return o == op || o == admissionregistrationv1.OperationAll
	}) && anyOf(r.Resources, resource, "*", "*/*") && anyOf(r.APIGroups, gv.Group, "*") && anyOf(r.APIVersions, gv.Version, "*") &&
		(r.Scope == nil || *r.Scope == admissionregistrationv1.AllScopes || *r.Scope == admissionregistrationv1.NamespacedScope)
}

// selectsAll reports whether an object selector selects every object.
func selectsAll(sel *metav1.LabelSelector) bool {
	return sel == nil || len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0
}
