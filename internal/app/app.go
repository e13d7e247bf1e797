// Package app wires express-sequencer into a controller-runtime manager: the
// admission webhooks, their certificates, the sequencer, metrics and probes. main parses
// flags into Options; tests and the local demo build the same manager.
package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/audit"
	"github.com/medallia/express-sequencer/internal/certs"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	expressscheme "github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/sequencer"
	expresswebhook "github.com/medallia/express-sequencer/internal/webhook"
)

// Certificate modes.
const (
	// CertModeSelfSigned: the binary creates, injects and renews its own CA
	// and serving certificate (local runs, clusters without cert-manager).
	CertModeSelfSigned = "self-signed"
	// CertModeCertManager: cert-manager writes the serving certificate into
	// the cert directory and injects the CA bundle; the binary only serves.
	CertModeCertManager = "cert-manager"
)

// auditConfirmAfter is how long the auditor lets a pod's judgement wait
// for the watches of its node before it reads the node fresh.
const auditConfirmAfter = time.Second

// Options configure the manager. Zero values are not defaults: main's flags
// and DefaultOptions set them.
type Options struct {
	MetricsAddr, ProbeAddr string
	// PprofAddr serves net/http/pprof when set ("" or "0": off).
	PprofAddr string
	// MetricsSecure serves metrics over HTTPS, each request authenticated
	// (TokenReview) and authorized (SubjectAccessReview for GET /metrics);
	// off, plain HTTP for local runs.
	MetricsSecure    bool
	LeaderElect      bool
	LeaderElectionID string
	LeaderElectionNS string

	WebhookHost  string
	WebhookPort  int
	CertDir      string
	CertMode     string
	CertHosts    []string
	CAValidity   time.Duration
	CertValidity time.Duration
	CertCheck    time.Duration
	CertWatch    time.Duration
	EnableHTTP2  bool
	OrdersFile   string

	// Webhooks turns the admission webhooks (and their certificates) on.
	Webhooks bool
	// Sequencer turns the sequencer (the rollout controller) on; off, the
	// binary only serves the webhooks.
	Sequencer        bool
	LeaseDuration    time.Duration
	RenewDeadline    time.Duration
	RetryPeriod      time.Duration
	ProgressDeadline time.Duration
	// Grouping is change grouping: the landing timeout for tenants with
	// rollout-id, the settle time and its cap for the others.
	Grouping       rollout.Grouping
	MaxConcurrent  int
	CASecret       string
	MutatingName   string
	ValidatingName string
	// SequencerUsers are further identities the webhook accepts as the
	// sequencer's, besides the one this process runs as (which it learns
	// from the API server): for a sequencer run apart from the webhooks.
	SequencerUsers []string
	// RecheckReleases has the webhooks judge every release again as it is
	// written, on the tenant read fresh at that moment.
	RecheckReleases bool
	// ScopedReads has the sequencer plan a release on its cache with only
	// the workload the release rests on read fresh, by name — where the
	// release guard judges every release again on a fresh read of the whole
	// tenant: with RecheckReleases, in a process that serves the webhooks
	// too, where the guard's webhooks are registered to judge the release.
	// Such a release is written as v2alpha1.FieldManagerGuardedRelease, which
	// a webhook replica that does not judge releases refuses
	// (docs/sequencer.md).
	ScopedReads bool
	// PodReadsByName has the pod webhook, in a process that runs the
	// sequencer too (its cache guesses the names), let a new Express pod
	// start on a read by name of what its start rests on, read twice to be
	// one moment. Off by default: measured, it costs more than the read of
	// the whole tenant it replaces (docs/performance.md).
	PodReadsByName bool
	// DefaultMode is the sequencing mode of a namespace without the
	// express.medallia.com/sequencing label: enforce or audit.
	DefaultMode string
	// Audit runs the order auditor beside the sequencer (on the elected
	// replica).
	Audit bool
	// WouldHoldGrace: in audit mode, a node whose target started less than
	// this before the sequencer's plan let it go is not reported as
	// would-have-held (the sequencer's reaction time).
	WouldHoldGrace time.Duration
	// AuditorTransport, when set, wraps the order auditor's connection to
	// the API server (the fault tests break its watches); nil in a
	// deployment.
	AuditorTransport func(http.RoundTripper) http.RoundTripper

	// Clock drives certificate renewal; the real clock unless a test sets it.
	Clock clock.Clock
	// Log is the manager's logger.
	Log logr.Logger
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		MetricsAddr:      ":8443",
		MetricsSecure:    true,
		ProbeAddr:        ":8081",
		LeaderElectionID: "express-sequencer.express.medallia.com",
		WebhookPort:      9443,
		CertDir:          filepath.Join("/tmp", "express-sequencer", "serving-certs"),
		CertMode:         CertModeSelfSigned,
		CertHosts:        []string{"localhost", "127.0.0.1", "express-sequencer-webhook-service.express-sequencer-system.svc"},
		CAValidity:       365 * 24 * time.Hour,
		CertValidity:     30 * 24 * time.Hour,
		CertCheck:        time.Hour,
		CertWatch:        10 * time.Second,
		MutatingName:     expresswebhook.MutatingConfigurationName,
		ValidatingName:   expresswebhook.ValidatingConfigurationName,
		Webhooks:         true,
		Sequencer:        true,
		RecheckReleases:  true,
		ScopedReads:      true,
		DefaultMode:      v2alpha1.ModeEnforce,
		Audit:            true,
		WouldHoldGrace:   5 * time.Second,
		ProgressDeadline: rollout.DefaultProgressDeadline,
		Grouping:         rollout.DefaultGrouping,
		MaxConcurrent:    32,
		LeaseDuration:    15 * time.Second,
		RenewDeadline:    10 * time.Second,
		RetryPeriod:      2 * time.Second,
		Clock:            clock.RealClock{},
		Log:              logr.Discard(),
	}
}

// New builds the manager: the webhook server with hot-reloaded certificates
// and the admission webhooks (o.Webhooks), the sequencer (o.Sequencer, under
// leader election when o.LeaderElect), metrics and probes.
func New(ctx context.Context, cfg *rest.Config, o Options) (manager.Manager, error) {
	orders, err := defaults.LoadOrders(o.OrdersFile)
	if err != nil {
		return nil, err
	}
	o.Log.Info("Default orders", "provisioning", orders.Provisioning.String(), "upgrade", orders.Upgrade.String())
	scheme := expressscheme.New()
	// Every request of every part, counted by caller, verb and resource
	// (express_sequencer_api_requests_total).
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(sequencer.CountRequests)

	var ws webhook.Server
	var runnables []manager.Runnable
	if o.Webhooks {
		var err error
		if ws, runnables, err = webhookServer(ctx, cfg, scheme, o); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Logger:                        o.Log,
		Cache:                         sequencer.CacheOptions(o.ValidatingName),
		Metrics:                       metricsOptions(o),
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              o.LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNS,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &o.LeaseDuration,
		RenewDeadline:                 &o.RenewDeadline,
		RetryPeriod:                   &o.RetryPeriod,
		WebhookServer:                 ws,
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	for _, r := range runnables {
		if err := mgr.Add(r); err != nil {
			return nil, err
		}
	}
	// The pod webhook, the release guard and the sequencer's releases read
	// the tenant straight from the API server.
	fresh, err := freshReader(mgr, o.Log)
	if err != nil {
		return nil, err
	}
	ready := healthz.Ping
	if o.Webhooks {
		self, err := whoAmI(ctx, cfg)
		if err != nil {
			return nil, err
		}
		o.Log.Info("Gate ownership", "sequencer identities", append([]string{self}, o.SequencerUsers...))
		expresswebhook.Register(mgr, fresh, expresswebhook.Settings{
			Orders: orders, Grouping: o.Grouping, Clock: o.Clock, SequencerUsers: append([]string{self}, o.SequencerUsers...),
			RecheckReleases: o.RecheckReleases, DefaultMode: o.DefaultMode,
			// The cache's pod index is the sequencer's (SetupWithManager).
			PodReadsByName: o.PodReadsByName && o.Sequencer,
		})
		ready = mgr.GetWebhookServer().StartedChecker()
	}
	if o.Sequencer {
		events := sequencer.NewEventWriter(mgr.GetClient(), mgr.GetScheme(), v2alpha1.FieldManager, mgr.GetLogger())
		if err := mgr.Add(events); err != nil {
			return nil, err
		}
		r := &sequencer.Reconciler{
			Client: mgr.GetClient(), Fresh: fresh, Orders: orders, Clock: o.Clock, ProgressDeadline: o.ProgressDeadline, Grouping: o.Grouping,
			Recorder: events, DefaultMode: o.DefaultMode,
			ScopedReads: o.ScopedReads && o.RecheckReleases && o.Webhooks,
			Guard:       sequencer.Guard{Configuration: o.ValidatingName, Webhooks: expresswebhook.ReleaseGuardWebhooks, Pods: expresswebhook.ReleaseGuardPods, Paths: expresswebhook.ReleaseGuardPaths},
		}
		if err := r.SetupWithManager(mgr, o.MaxConcurrent); err != nil {
			return nil, fmt.Errorf("setting up the sequencer: %w", err)
		}
		departures := &sequencer.DeparturesRegistered{Reader: mgr.GetClient(), Guard: r.Guard}
		if err := departures.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("setting up the check of the node webhooks' registration: %w", err)
		}
		if o.Audit {
			cfg := rest.CopyConfig(mgr.GetConfig())
			if o.AuditorTransport != nil {
				cfg.Wrap(o.AuditorTransport)
			}
			cfg.Wrap(sequencer.CountAs(sequencer.CallerAuditor))
			if err := mgr.Add(&audit.Auditor{
				Config: cfg, Conditions: audit.Conditions{Client: mgr.GetClient(), Clock: o.Clock}, Recorder: events,
				DefaultMode: o.DefaultMode, ConfirmAfter: auditConfirmAfter, WouldHoldGrace: o.WouldHoldGrace, Clock: clock.RealClock{}, Log: o.Log.WithName("auditor"),
			}); err != nil {
				return nil, err
			}
		}
	}
	if err := errors.Join(mgr.AddHealthzCheck("ping", healthz.Ping), mgr.AddReadyzCheck("ready", ready)); err != nil {
		return nil, fmt.Errorf("adding probes: %w", err)
	}
	return mgr, nil
}

// metricsOptions serves metrics as kubebuilder scaffolds them: over HTTPS
// (a self-signed certificate controller-runtime makes), behind
// authentication and authorization through the API server, unless
// o.MetricsSecure is off.
func metricsOptions(o Options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsAddr}
	if o.MetricsSecure {
		m.SecureServing = true
		m.FilterProvider = filters.WithAuthenticationAndAuthorization
		m.TLSOpts = []func(*tls.Config){func(c *tls.Config) {
			c.MinVersion = tls.VersionTLS12
			if !o.EnableHTTP2 {
				c.NextProtos = []string{"http/1.1"}
			}
		}}
	}
	return m
}

// whoAmI asks the API server which user this process authenticates as (a
// SelfSubjectReview): the identity the sequencer's writes carry, and so the
// only one the webhook lets remove the sequencer's gate.
func whoAmI(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	review, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("asking the API server who express-sequencer runs as (SelfSubjectReview), to own the sequencer's gate: %w", err)
	}
	return review.Status.UserInfo.Username, nil
}

// everyReplica is a runnable that runs on every replica, leader or not.
type everyReplica func(context.Context) error

func (f everyReplica) Start(ctx context.Context) error { return f(ctx) }
func (f everyReplica) NeedLeaderElection() bool        { return false }

// webhookServer prepares the webhook server: in self-signed mode it creates
// the certificates (and injects the CA bundle) first, so the server can
// serve at once; in both modes it serves whatever is in the cert directory,
// reloading renewed certificates without a restart.
func webhookServer(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, o Options) (webhook.Server, []manager.Runnable, error) {
	var runnables []manager.Runnable
	switch o.CertMode {
	case CertModeSelfSigned:
		direct, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return nil, nil, fmt.Errorf("creating client for CA injection: %w", err)
		}
		var caSecret *types.NamespacedName
		if o.CASecret != "" {
			ns, name, ok := strings.Cut(o.CASecret, "/")
			if !ok || ns == "" || name == "" {
				return nil, nil, fmt.Errorf("--ca-secret %q: want namespace/name", o.CASecret)
			}
			caSecret = &types.NamespacedName{Namespace: ns, Name: name}
		}
		rotator := &certs.Rotator{
			Dir: o.CertDir, Hosts: o.CertHosts, Clock: o.Clock, Client: direct, Watch: direct, CASecret: caSecret,
			CAValidity: o.CAValidity, CertValidity: o.CertValidity, CheckInterval: o.CertCheck,
			MutatingConfigurations: []string{o.MutatingName}, ValidatingConfigurations: []string{o.ValidatingName},
			Log: o.Log.WithName("certs"),
		}
		if _, err := rotator.Ensure(ctx); err != nil {
			return nil, nil, fmt.Errorf("preparing self-signed webhook certificates: %w", err)
		}
		runnables = append(runnables, rotator)
	case CertModeCertManager:
	default:
		return nil, nil, fmt.Errorf("--cert-mode %q: want %q or %q", o.CertMode, CertModeSelfSigned, CertModeCertManager)
	}
	watcher, err := certwatcher.New(filepath.Join(o.CertDir, certs.CertFile), filepath.Join(o.CertDir, certs.KeyFile))
	if err != nil {
		return nil, nil, fmt.Errorf("loading webhook certificate from %s: %w", o.CertDir, err)
	}
	watcher = watcher.WithWatchInterval(o.CertWatch)
	runnables = append(runnables, everyReplica(watcher.Start))
	ws := webhook.NewServer(webhook.Options{
		Host: o.WebhookHost, Port: o.WebhookPort, CertDir: o.CertDir,
		TLSOpts: []func(*tls.Config){func(c *tls.Config) {
			c.MinVersion = tls.VersionTLS12
			c.GetCertificate = watcher.GetCertificate
			if !o.EnableHTTP2 {
				// HTTP/2 stays off unless asked for: it exposed servers to the
				// stream-cancellation attacks CVE-2023-44487 and CVE-2023-39325.
				c.NextProtos = []string{"http/1.1"}
			}
		}},
	})
	return ws, runnables, nil
}
