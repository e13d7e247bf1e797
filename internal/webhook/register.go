package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// Paths the webhooks are served at; they match the markers below and so the
// generated config/webhook/manifests.yaml.
const (
	MutateBackendPath    = "/mutate-express-medallia-com-v2alpha1-backend"
	MutateFrontendPath   = "/mutate-express-medallia-com-v2alpha1-frontend"
	ValidateBackendPath  = "/validate-express-medallia-com-v2alpha1-backend"
	ValidateFrontendPath = "/validate-express-medallia-com-v2alpha1-frontend"
	MutatePodPath        = "/mutate-v1-pod"
	ValidatePodPath      = "/validate-v1-pod"
)

// ReleaseGuardWebhooks are the validating webhooks that judge, with
// --recheck-releases, the releases the sequencer writes, by the resource
// whose updates each judges (their names in the markers below).
var ReleaseGuardWebhooks = map[string]string{
	"backends":  "vbackend.express.medallia.com",
	"frontends": "vfrontend.express.medallia.com",
	"pods":      "vpod.express.medallia.com",
}

// ReleaseGuardPaths are the paths the release guard's webhooks are served
// at, by the resource whose updates each judges.
var ReleaseGuardPaths = map[string]string{"backends": ValidateBackendPath, "frontends": ValidateFrontendPath, "pods": ValidatePodPath}

// ReleaseGuardPods is how the release guard's pod webhook selects the pod
// updates it judges: Express pods held by the sequencer (the objectSelector
// and matchConditions of its marker below; a test holds the two together).
var ReleaseGuardPods = sequencer.PodSelection{
	ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: v2alpha1.LabelNode, Operator: metav1.LabelSelectorOpExists}}},
	MatchConditions: []admissionregistrationv1.MatchCondition{{Name: "held-by-the-sequencer",
		Expression: "has(oldObject.spec.schedulingGates) && oldObject.spec.schedulingGates.exists(g, g.name == '" + v2alpha1.GateSequencer + "')"}},
}

// Names of the generated webhook configurations, as in config/webhook.
const (
	MutatingConfigurationName   = "express-sequencer-mutating-webhook-configuration"
	ValidatingConfigurationName = "express-sequencer-validating-webhook-configuration"
)

// +kubebuilder:webhook:path=/mutate-express-medallia-com-v2alpha1-backend,mutating=true,failurePolicy=fail,sideEffects=None,groups=express.medallia.com,resources=backends,verbs=create;update,versions=v2alpha1,name=mbackend.express.medallia.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=5,reinvocationPolicy=IfNeeded
// +kubebuilder:webhook:path=/mutate-express-medallia-com-v2alpha1-frontend,mutating=true,failurePolicy=fail,sideEffects=None,groups=express.medallia.com,resources=frontends,verbs=create;update,versions=v2alpha1,name=mfrontend.express.medallia.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=5,reinvocationPolicy=IfNeeded
// The pod webhook is sent only pods labelled express.medallia.com/node. Its
// failure policy is Fail: while no replica serves, new Express pods are
// refused (their controllers retry) rather than scheduled out of order; no
// other pod in the cluster is affected.
// +kubebuilder:webhook:path=/mutate-v1-pod,mutating=true,failurePolicy=fail,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=mpod.express.medallia.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=5,reinvocationPolicy=IfNeeded,patch=`{"objectSelector":{"matchExpressions":[{"key":"express.medallia.com/node","operator":"Exists"}]}}`
// The pod gate guard is sent only updates of pods labelled
// express.medallia.com/node that carry the sequencer's scheduling gate (a
// match condition): pods that have never been scheduled. Its failure policy
// is Fail: while no replica serves, such a pod keeps its gate (its release
// is retried); no running pod's update ever waits on it.
// +kubebuilder:webhook:path=/validate-v1-pod,mutating=false,failurePolicy=fail,sideEffects=None,groups="",resources=pods,verbs=update,versions=v1,name=vpod.express.medallia.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=5,patch=`{"objectSelector":{"matchExpressions":[{"key":"express.medallia.com/node","operator":"Exists"}]},"matchConditions":[{"name":"held-by-the-sequencer","expression":"has(oldObject.spec.schedulingGates) && oldObject.spec.schedulingGates.exists(g, g.name == 'express.medallia.com/sequencer')"}]}`
// The node validating webhooks are sent deletes too: a deletion, or a move
// to another tenant, is dated on the nodes of the tenant that stay
// (DeletionDater), a write the change waits for and a dry run skips
// (sideEffects NoneOnDryRun). Their
// failure policy is Fail: while no replica serves, Express nodes are
// neither created, changed nor deleted.
// +kubebuilder:webhook:path=/validate-express-medallia-com-v2alpha1-backend,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=express.medallia.com,resources=backends,verbs=create;update;delete,versions=v2alpha1,name=vbackend.express.medallia.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-express-medallia-com-v2alpha1-frontend,mutating=false,failurePolicy=fail,sideEffects=NoneOnDryRun,groups=express.medallia.com,resources=frontends,verbs=create;update;delete,versions=v2alpha1,name=vfrontend.express.medallia.com,admissionReviewVersions=v1,matchPolicy=Equivalent,timeoutSeconds=5

// Settings are what the webhooks share with the sequencer: the default
// orders, the change grouping (the pod webhook decides as the sequencer
// does), the clock that stamps target changes, and the identities the
// sequencer writes as.
type Settings struct {
	Orders         defaults.Orders
	Grouping       rollout.Grouping
	Clock          clock.PassiveClock
	SequencerUsers []string
	// RecheckReleases judges every release again as it is written, on the
	// tenant read fresh at that moment (ReleaseGuard).
	RecheckReleases bool
	// DefaultMode is the sequencing mode of a namespace without the
	// express.medallia.com/sequencing label.
	DefaultMode string
	// PodReadsByName has the pod webhook let a pod start on a read by name
	// of what its start rests on (PodGate.Cache), reader guessing the names.
	PodReadsByName bool
	// Writer writes as the sequencer: the date of a node's deletion or
	// move on the nodes of its tenant that stay (DeletionDater). Nil leaves deletions
	// undated (tests of other webhooks only).
	Writer client.Writer
}

// Handlers returns the admission webhooks by path. reader lists a tenant's
// nodes for the validating checks (the manager's cache in production);
// fresh reads them straight from the API server for the pod webhook and the
// release guard.
func Handlers(scheme *runtime.Scheme, reader, fresh client.Reader, set Settings) map[string]*admission.Webhook {
	orders, clk, sequencerUsers := set.Orders, set.Clock, set.SequencerUsers
	var releases *ReleaseGuard
	if set.RecheckReleases {
		releases = &ReleaseGuard{Reader: fresh, Orders: orders, Grouping: set.Grouping, Clock: clk, DefaultMode: set.DefaultMode}
	}
	podGate := &PodGate{Reader: fresh, Orders: orders, Grouping: set.Grouping, Clock: clk, DefaultMode: set.DefaultMode}
	if set.PodReadsByName {
		podGate.Cache = reader
	}
	var deletions *DeletionDater
	if set.Writer != nil {
		deletions = &DeletionDater{Reader: fresh, Writer: set.Writer, Clock: clk, DefaultMode: set.DefaultMode}
	}
	hooks := map[string]*admission.Webhook{
		MutateBackendPath:    admission.WithDefaulter[*v2alpha1.Backend](scheme, &Defaulter[*v2alpha1.Backend]{Orders: orders, Decoder: admission.NewDecoder(scheme), Clock: clk, SettleTime: set.Grouping.SettleTime, Sequencer: sequencerUsers, Modes: fresh, DefaultMode: set.DefaultMode}),
		MutateFrontendPath:   admission.WithDefaulter[*v2alpha1.Frontend](scheme, &Defaulter[*v2alpha1.Frontend]{Orders: orders, Decoder: admission.NewDecoder(scheme), Clock: clk, SettleTime: set.Grouping.SettleTime, Sequencer: sequencerUsers, Modes: fresh, DefaultMode: set.DefaultMode}),
		ValidateBackendPath:  admission.WithValidator[*v2alpha1.Backend](scheme, &Validator[*v2alpha1.Backend]{Reader: reader, Fresh: fresh, Orders: orders, Releases: releases, Deletions: deletions}),
		ValidateFrontendPath: admission.WithValidator[*v2alpha1.Frontend](scheme, &Validator[*v2alpha1.Frontend]{Reader: reader, Fresh: fresh, Orders: orders, Releases: releases, Deletions: deletions}),
		MutatePodPath:        {Handler: podGate},
		ValidatePodPath:      {Handler: &PodGateGuard{Sequencer: sequencerUsers, Releases: releases}},
	}
	for path, kind := range map[string]string{MutateBackendPath: v2alpha1.KindBackend, MutateFrontendPath: v2alpha1.KindFrontend} {
		hooks[path].Handler = withSchemaErrors(kind, withWarnings(hooks[path].Handler))
	}
	return hooks
}

// Register serves the admission webhooks on the manager's webhook server;
// fresh reads straight from the API server (sequencer.FreshReader).
func Register(mgr ctrl.Manager, fresh client.Reader, set Settings) {
	if set.Writer == nil {
		set.Writer = mgr.GetClient()
	}
	for path, hook := range Handlers(mgr.GetScheme(), mgr.GetClient(), fresh, set) {
		mgr.GetWebhookServer().Register(path, hook)
	}
}
