package app

import (
	"flag"
	"fmt"
	"strings"

	"go.uber.org/zap/zapcore"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// CommandLine is what express-sequencer's flags set besides Options: the
// connection to the API server, logging, --version.
type CommandLine struct {
	Kubeconfig     string
	QPS            float64
	Burst          int
	Version        bool
	LogLevel       string
	LogDevelopment bool
	// Zap holds controller-runtime's --zap-* flags.
	Zap   crzap.Options
	hosts string
}

// ParseFlags parses the command line into o, which holds the defaults, and
// returns the rest of what it set. A request for help returns flag.ErrHelp.
func ParseFlags(args []string, o *Options, usage func(*flag.FlagSet)) (*CommandLine, error) {
	fs := flag.NewFlagSet("express-sequencer", flag.ContinueOnError)
	if usage != nil {
		fs.Usage = func() { usage(fs) }
	}
	c := &CommandLine{}
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Address the Prometheus metrics endpoint listens on; \"0\" turns it off.")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", o.MetricsSecure, "Serve metrics over HTTPS to callers the API server authenticates and authorizes for GET /metrics (a TokenReview and a SubjectAccessReview per request); false serves plain HTTP, for local runs.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "Address the /healthz and /readyz probes listen on.")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", o.PprofAddr, "Address net/http/pprof listens on, for profiling (e.g. 127.0.0.1:6060); empty turns it off.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader among replicas (a Lease) so that only one sequences rollouts; every replica serves webhooks.")
	fs.StringVar(&o.LeaderElectionNS, "leader-election-namespace", o.LeaderElectionNS, "Namespace of the leader election Lease; defaults to the pod's namespace in a cluster.")
	fs.Func("sequencer-user", "Further identities (user names as the API server authenticates them, e.g. system:serviceaccount:ns:name) the webhook accepts as the sequencer's, besides the one this process runs as: only they may remove the sequencer's gate and record a release. For a sequencer run apart from the webhooks; repeat for several.", func(v string) error {
		o.SequencerUsers = append(o.SequencerUsers, v)
		return nil
	})
	fs.StringVar(&o.WebhookHost, "webhook-host", o.WebhookHost, "Address the webhook server binds to; empty binds all addresses.")
	fs.IntVar(&o.WebhookPort, "webhook-port", o.WebhookPort, "Port the webhook server listens on (TLS).")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir, "Directory holding tls.crt and tls.key; watched, so renewed certificates are served without a restart.")
	fs.StringVar(&o.CertMode, "cert-mode", o.CertMode, "Where the serving certificate comes from: \"self-signed\" (created, injected into the webhook configurations and renewed by this binary) or \"cert-manager\" (written to --cert-dir by a cert-manager Certificate; CA injected by cainjector).")
	fs.StringVar(&c.hosts, "cert-hosts", strings.Join(o.CertHosts, ","), "Comma-separated DNS names and IPs of the self-signed serving certificate.")
	fs.DurationVar(&o.CertValidity, "cert-validity", o.CertValidity, "Lifetime of a self-signed serving certificate; it is renewed when a third is left.")
	fs.DurationVar(&o.CAValidity, "ca-validity", o.CAValidity, "Lifetime of the self-signed CA; it is renewed when a third is left, and the old CA stays trusted until it expires.")
	fs.DurationVar(&o.CertCheck, "cert-check-interval", o.CertCheck, "How often self-signed certificates are checked for renewal.")
	fs.StringVar(&o.CASecret, "ca-secret", o.CASecret, "With --cert-mode=self-signed and several replicas: namespace/name of a Secret holding the CA they share (created and renewed by whichever replica gets there first), so that the one CA bundle in the webhook configurations trusts them all.")
	fs.BoolVar(&o.EnableHTTP2, "enable-http2", o.EnableHTTP2, "Serve webhooks over HTTP/2 as well; off by default (CVE-2023-44487, CVE-2023-39325).")
	fs.StringVar(&o.OrdersFile, "order-config", o.OrdersFile, "YAML file with this installation's default orders, e.g. \"provisioningOrder: [be]\" and \"upgradeOrder: [fe1, fe2, be]\"; frontends not listed follow in ascending number. Empty uses those built-in orders.")
	fs.StringVar(&o.MutatingName, "mutating-webhook-configuration", o.MutatingName, "MutatingWebhookConfiguration to inject the self-signed CA bundle into.")
	fs.StringVar(&o.ValidatingName, "validating-webhook-configuration", o.ValidatingName, "ValidatingWebhookConfiguration of the node and pod webhooks: the self-signed CA bundle is injected into it, the sequencer reads it to learn whether the release guard judges every release (--scoped-reads) and whether every deletion of a node is dated (express_sequencer_departures_undated), and of the cluster's validating webhook configurations the manager's cache watches it alone.")
	fs.BoolVar(&o.Webhooks, "webhooks", o.Webhooks, "Serve the admission webhooks; with false the binary only runs the sequencer.")
	fs.DurationVar(&o.LeaseDuration, "leader-election-lease-duration", o.LeaseDuration, "How long a replica waits for a silent leader before taking over.")
	fs.DurationVar(&o.RenewDeadline, "leader-election-renew-deadline", o.RenewDeadline, "How long the leader keeps trying to renew its lease before it stops sequencing.")
	fs.DurationVar(&o.RetryPeriod, "leader-election-retry-period", o.RetryPeriod, "How often replicas try to acquire or renew the lease.")
	fs.BoolVar(&o.RecheckReleases, "recheck-releases", o.RecheckReleases, "Judge every release again as the API server is about to store it: the removal of the sequencer's gate from a node or an Express pod is refused unless the sequencer's own plan, on the tenant read fresh at that moment, releases it too (it guards against a replica frozen between its read and its write). Costs one fresh read of the tenant per release. false leaves the sequencer's own fresh read as the only guard: for a webhook replica that cannot read the cluster, or to rule the check out while diagnosing.")
	fs.BoolVar(&o.ScopedReads, "scoped-reads", o.ScopedReads, "With --recheck-releases, in a process that also serves the webhooks: plan a release on the cache with only the workload of the nodes it rests on read fresh, by name (each node's StatefulSet named after it and its ordinal pods: the operator contract), and leave the consistent read of the whole tenant to the release guard, which judges the release as it is written. Such a release is written as field manager express-sequencer-guarded-release, which a webhook replica run with --recheck-releases=false refuses: the sequencer then reads the tenant whole for 5 minutes. A namespace in audit, one the guard's webhooks are not registered to judge, or a node whose StatefulSet is named otherwise has its tenant read whole, as false always does.")
	fs.BoolVar(&o.PodReadsByName, "pod-reads-by-name", o.PodReadsByName, "Experimental, for measurement; slower than false on the measurements so far. In a process that runs the sequencer too: have the pod webhook let a new Express pod start on a read by name of its node, the nodes it may wait for and their workload — read twice, with the namespace's nodes listed between, to be one moment — holding it gated on that read where it may not start in an enforcing namespace, and reading the whole tenant only where that read cannot be made or changed between its two reads, in audit, where the namespace's mode cannot be read or for a pod bound to a machine. No later check judges such a pod, so it rests on the operator's StatefulSets being named after their nodes and owning all their pods (the conformance kit's statefulset clause), and on nothing else making pods with a node's label.")
	fs.BoolVar(&o.Sequencer, "sequencer", o.Sequencer, "Run the sequencer, which releases gated nodes in dependency order; with false the binary only serves the webhooks.")
	fs.DurationVar(&o.ProgressDeadline, "progress-deadline", o.ProgressDeadline, "How long a released node may take to become Ready on its target before it is reported as ProgressDeadlineExceeded (its dependents stay gated; nothing is reverted). 0 turns the check off.")
	fs.DurationVar(&o.Grouping.LandingTimeout, "landing-timeout", o.Grouping.LandingTimeout, "How long a tenant whose nodes disagree on the express.medallia.com/rollout-id annotation (a change still landing node by node) is held before the sequencer proceeds with what landed and records a Warning Event; 0 holds it until they agree.")
	fs.DurationVar(&o.Grouping.SettleTime, "settle-time", o.Grouping.SettleTime, "For tenants whose nodes carry no rollout-id, and for changes made without a new rollout-id (a kubectl edit of a node the chart renders): how long after the tenant's latest such change — of a node's target, or of its order alone (taken down, created down, paused or unpaused, a prerequisite list of the user's, moved to another tenant) — the sequencer waits before releasing any of its nodes, so that a change applied node by node is ordered as one rollout; every tenant, with rollout-id too, waits as long after one of its nodes was deleted or moved away. Crash recovery never waits. The webhooks read it too (a node's run of changes, for --settle-cap): give a sequencer and webhooks run apart the same value.")
	fs.DurationVar(&o.Grouping.SettleCap, "settle-cap", o.Grouping.SettleCap, "The longest a node's changes hold its tenant in a settle-time hold, in all over one run of changes (changes to it each less than --settle-time after the one before, or made while the settle hold still holds it), each counted until the next or for --settle-time, whichever is sooner (a render that came with its own rollout-id, which the settle hold never held, counts for nothing), however often it keeps changing; 0 means no cap.")
	fs.IntVar(&o.MaxConcurrent, "max-concurrent-reconciles", o.MaxConcurrent, "Tenants sequenced in parallel. A reconcile that releases spends most of its time waiting for the API server's consistent reads, so at fleet scale the releases queue behind this many workers: see docs/performance.md.")
	fs.StringVar(&o.DefaultMode, "default-sequencing", o.DefaultMode, "Sequencing mode of a namespace without the express.medallia.com/sequencing label: \"enforce\" (the webhooks gate, the sequencer releases in dependency order) or \"audit\" (no gate is added, nothing is held or released; each node's PrerequisitesReady condition says what enforcing would hold, and the order auditor reports where it would have held). See docs/operations.md, \"Audit first\".")
	fs.BoolVar(&o.Audit, "audit", o.Audit, "Run the order auditor beside the sequencer: it judges, in both modes, the rollouts the cluster made from watches of nodes, pods and StatefulSets, counts each pod created while its node was gated (express_sequencer_order_violations_total) and says it in a Warning Event and the node's OrderKept condition. It never holds or releases anything.")
	fs.DurationVar(&o.WouldHoldGrace, "audit-would-hold-grace", o.WouldHoldGrace, "In audit mode, a node whose new target started less than this before the sequencer's plan let it go is not reported as would-have-held: enforcing would have released it as soon, within the sequencer's reaction time.")
	fs.StringVar(&c.LogLevel, "log-level", "", "Lowest level logged: debug, info, warn or error (the same as --zap-log-level).")
	fs.BoolVar(&c.LogDevelopment, "log-development", false, "Human-readable console logs instead of JSON (the same as --zap-devel).")
	c.Zap.BindFlags(fs)
	fs.BoolVar(&c.Version, "version", false, "Print the version and exit.")
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "Path to a kubeconfig; see above for the order of lookup.")
	fs.Float64Var(&c.QPS, "kube-api-qps", 500, "Requests per second to the API server, sustained. A release costs about ten (three consistent lists, the gate patch, conditions, Events); the API server's Priority and Fairness queues them fairly with everyone else's.")
	fs.IntVar(&c.Burst, "kube-api-burst", 1000, "Requests to the API server in a burst.")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected arguments %q; see --help", fs.Args())
	}
	o.CertHosts = splitList(c.hosts)
	if o.DefaultMode != v2alpha1.ModeEnforce && o.DefaultMode != v2alpha1.ModeAudit {
		return nil, fmt.Errorf("--default-sequencing %q: want %q or %q", o.DefaultMode, v2alpha1.ModeEnforce, v2alpha1.ModeAudit)
	}
	if c.LogDevelopment {
		c.Zap.Development = true
	}
	if c.LogLevel != "" {
		level, err := zapcore.ParseLevel(c.LogLevel)
		if err != nil {
			return nil, fmt.Errorf("--log-level: %w", err)
		}
		c.Zap.Level = level
	}
	return c, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
