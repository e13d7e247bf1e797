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
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
)

const (
	v1 = "express-e689.151"
	v2 = "express-e689.154"
)

var (
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
	op := &expressoperator.Operator{StartAfter: 50 * time.Millisecond, ReadyAfter: 200 * time.Millisecond,
		Replicas:     func(n v2alpha1.Node) int32 { return replicas.get(n.GetNamespace()) },
		GracePeriod:  func(n v2alpha1.Node) time.Duration { return grace.get(n.GetNamespace()) },
		ReadyAfterOf: func(n v2alpha1.Node) time.Duration { return readyAfter.get(n.GetNamespace()) }}
	stopOp, err := harness.StartController(op.SetupWithManager)
	if err != nil {
		return 0, err
	}
	defer stopOp()
	return m.Run(), nil
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

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "cluster-"}}
	require.NoError(t, harness.Client.Create(context.Background(), ns))
	return ns.Name
}

func key(i int) string {
	if i == 0 {
		return "be"
	}
	return fmt.Sprintf("fe%d", i)
}

func keys(size int) []string {
	out := make([]string, size)
	for i := range out {
		out[i] = key(i)
	}
	return out
}

func node(ns, k string) v2alpha1.Node {
	kind := v2alpha1.KindFrontend
	if k == "be" {
		kind = v2alpha1.KindBackend
	}
	n := v2alpha1.NewNode(kind)
	n.SetName("acme-" + k)
	n.SetNamespace(ns)
	return n
}

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
	for _, k := range keys(size) {
		nd := node(ns, k)
		*nd.NodeSpec() = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "acme", TenantID: "1", TenantName: "acme"}, ExpressVersion: v1}
		require.NoError(t, harness.Client.Create(context.Background(), nd))
	}
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

// update changes nodes through the API server and the webhooks, retrying
// on conflicts as kubectl does.
func update(t *testing.T, ns string, edit func(v2alpha1.Node), ks ...string) {
	t.Helper()
	for _, k := range ks {
		require.Eventually(t, func() bool {
			n := node(ns, k)
			if err := harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n); err != nil {
				return false
			}
			edit(n)
			return harness.Client.Update(context.Background(), n) == nil
		}, 10*time.Second, 10*time.Millisecond)
	}
}

func setVersion(t *testing.T, ns, version string, ks ...string) {
	t.Helper()
	update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().ExpressVersion = version }, ks...)
}

// waitSettled waits until every node of ns is ungated, RolloutComplete and
// Ready on its target, every pod it should have there.
func waitSettled(t *testing.T, ns string) {
	t.Helper()
	var why string
	ok := waitFor(2*time.Minute, func() bool {
		done, w, err := controlplane.Settled(context.Background(), harness.Client, ns)
		why = w
		return err == nil && done && allPods(ns)
	})
	if !ok {
		dump(t, ns)
	}
	require.True(t, ok, "tenant %s did not settle: %s; pods started: %v", ns, why, starts(ns, time.Time{}))
}

// dump logs what the tenant's nodes, StatefulSets and pods say, for a
// tenant that did not settle.
func dump(t *testing.T, ns string) {
	t.Helper()
	for _, line := range controlplane.Describe(context.Background(), harness.Client, pods, ns) {
		t.Log(line)
	}
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
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			matches := true
			for k, v := range match {
				matches = matches && labels[k] == v
			}
			if matches {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
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

func waitFor(timeout time.Duration, f func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if f() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

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
