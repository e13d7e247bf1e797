// Package cluster runs rollouts on Kubernetes' own control loops: the real
// webhooks and the sequencer on kube-apiserver + etcd, beside
// kube-controller-manager (the StatefulSet controller, the garbage
// collector), kube-scheduler and KWOK as the kubelet of fake Nodes. The
// Express operator's part is played by expressoperator: one StatefulSet per
// node, honouring the gates; every pod is created by a StatefulSet,
// scheduled by the scheduler and made Ready by KWOK.
package cluster

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
	"github.com/medallia/express-sequencer/test/framework/tenant"
)

const (
	v1 = "express-e689.151"
	v2 = "express-e689.154"
)

var (
	// tenants makes the suite's tenants.
	tenants tenant.Suite
	harness *controlplane.Harness
	cluster *controlplane.Cluster
	pods    *controlplane.PodLog
	// replicas are the pods each node of a namespace runs (1 by default),
	// grace how long its deleted pods stay Terminating (0 by default),
	// readyAfter how long its pods take to become Ready (200 ms by
	// default).
	replicas   perNamespace[int32]
	grace      perNamespace[time.Duration]
	readyAfter perNamespace[time.Duration]
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	// The harness serves the webhooks; the sequencer runs in a manager of
	// its own, so that a test can stop it and start it again.
	if harness, err = controlplane.NewHarness(logr.Discard(), func(o *app.Options) {
		settings(o)
		o.Sequencer = false
	}); err != nil {
		return 0, err
	}
	defer func() { _ = harness.Stop() }()
	if err := startSequencer(); err != nil {
		return 0, err
	}
	defer func() { stopSequencer() }()
	if cluster, err = harness.StartCluster(2); err != nil {
		return 0, err
	}
	defer func() { _ = cluster.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if pods, err = controlplane.WatchPods(ctx, harness.Config); err != nil {
		return 0, err
	}
	tenants = tenant.Suite{Client: harness.Client, Pods: pods, Prefix: "cluster-", Poll: 50 * time.Millisecond}
	op := &expressoperator.Operator{StartAfter: 50 * time.Millisecond, ReadyAfter: 200 * time.Millisecond,
		Replicas:     func(n v2alpha1.Node) int32 { return replicas.get(n.GetNamespace()) },
		GracePeriod:  func(n v2alpha1.Node) time.Duration { return grace.get(n.GetNamespace()) },
		ReadyAfterOf: func(n v2alpha1.Node) time.Duration { return readyAfter.get(n.GetNamespace()) }}
	stopOp, err := harness.StartController(op.SetupWithManager)
	if err != nil {
		return 0, err
	}
	defer stopOp()
	code := m.Run()
	if code == 0 {
		// Every rollout of the suite kept the order: the auditor, which
		// judges what the cluster did without the planner, must agree.
		if err := auditmetrics.NoViolations(context.Background(), harness.Client, time.Minute); err != nil {
			return 1, err
		}
	}
	return code, nil
}

// settings are the suite's: a tenant's updates here land within
// milliseconds of each other.
func settings(o *app.Options) {
	o.Grouping.SettleTime = 300 * time.Millisecond
	o.Grouping.LandingTimeout = 20 * time.Second // a node left behind (left_behind_test.go) holds a landing this long
	o.ProgressDeadline = time.Minute
}

// stopSequencer stops the suite's sequencer.
var stopSequencer = func() {}

// startSequencer starts the suite's sequencer (a sequencer-only
// express-sequencer).
func startSequencer() error {
	o := harness.ManagerOptions("", logr.Discard())
	settings(&o)
	o.Webhooks = false
	_, stop, err := harness.StartManager(o)
	if err != nil {
		return err
	}
	stopSequencer = stop
	return nil
}

func namespace(t *testing.T) string { return tenants.Namespace(t) }

func key(i int) string { return tenant.Key(i) }

func keys(size int) []string { return tenant.Keys(size) }

func node(ns, k string) v2alpha1.Node { return tenant.Node(ns, k) }

// settledTenant creates a tenant of size nodes at v1 in a new namespace,
// each node running n pods, and waits until it is provisioned.
func settledTenant(t *testing.T, size int, n int32) string {
	t.Helper()
	ns := namespace(t)
	replicas.set(ns, n)
	createNodes(t, ns, size)
	waitSettled(t, ns)
	return ns
}

// createNodes creates be, fe1…fe(size-1) at v1 in ns, as the chart does.
func createNodes(t *testing.T, ns string, size int) {
	t.Helper()
	tenants.Create(t, ns, size, v1, nil)
}

// releaseMessages returns the notes of the Released Events of node name.
func releaseMessages(t *testing.T, ns, name string) []string {
	t.Helper()
	var events eventsv1.EventList
	require.NoError(t, harness.Client.List(context.Background(), &events, client.InNamespace(ns)))
	var out []string
	for _, e := range events.Items {
		if e.Reason == v2alpha1.ReasonReleased && e.Regarding.Name == name {
			out = append(out, e.Note)
		}
	}
	return out
}

func update(t *testing.T, ns string, edit func(v2alpha1.Node), ks ...string) {
	t.Helper()
	tenants.Update(t, ns, edit, ks...)
}

func setVersion(t *testing.T, ns, version string, ks ...string) {
	t.Helper()
	tenants.SetVersion(t, ns, version, ks...)
}

// waitSettled waits until the tenant of ns has settled (tenant.Suite.WaitSettled).
func waitSettled(t *testing.T, ns string) {
	t.Helper()
	tenants.WaitSettled(t, ns, 0, 2*time.Minute, func() string { return starts(ns, time.Time{}) })
}

func dump(t *testing.T, ns string) {
	t.Helper()
	tenants.Dump(t, ns)
}

// allPods reports whether every StatefulSet of ns has as many pods Ready
// as it wants.
func allPods(ns string) bool {
	return controlplane.StatefulSetsReady(context.Background(), harness.Client, ns)
}

// starts returns the node keys of ns whose pods were bound to a Node since
// mark, in order (a node again when it starts again after another).
func starts(ns string, mark time.Time) string {
	var out []string
	for _, n := range pods.Starts(ns, mark) {
		out = append(out, strings.TrimPrefix(n, "acme-"))
	}
	return strings.Join(out, " ")
}

// counter sums the samples of the counter called name, in this process's
// metrics registry (the suite's sequencer runs in it), whose labels
// include every label of match.
func counter(t *testing.T, name string, match map[string]string) float64 {
	t.Helper()
	n, err := auditmetrics.SumWhere(name, match)
	require.NoError(t, err)
	return n
}

// waitReleased waits until the sequencer's gate is gone from node k of ns
// (another system's gate may stay), and returns it as read then.
func waitReleased(t *testing.T, ns, k string) v2alpha1.Node {
	t.Helper()
	n := node(ns, k)
	require.True(t, waitFor(time.Minute, func() bool {
		return harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n) == nil && !n.NodeSpec().HasGate(v2alpha1.GateSequencer)
	}), "%s is released", n.GetName())
	return n
}

func waitFor(timeout time.Duration, f func() bool) bool { return tenants.WaitFor(timeout, f) }

// perNamespace is a setting per namespace, read by the operator's
// reconciles while tests set it.
type perNamespace[V any] struct {
	mu sync.Mutex
	m  map[string]V
}

func (p *perNamespace[V]) set(ns string, v V) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]V{}
	}
	p.m[ns] = v
}

func (p *perNamespace[V]) get(ns string) V {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.m[ns]
}
