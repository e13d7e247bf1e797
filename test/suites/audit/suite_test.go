// Package audit proves the order auditor on Kubernetes' own control loops
// (kube-controller-manager, kube-scheduler, KWOK) with express-sequencer's
// webhooks, sequencer and auditor installed (the sequencer with
// --scoped-reads, the pod webhook with --pod-reads-by-name): it counts nothing where the order held, and finds what
// it is for — an operator that ignores the gates, a pod made by hand for a
// gated node's new target — naming the node and the pod in its Event and
// condition. Every row of DESIGN §4 holds across a switch of the
// namespace's mode, both ways.
package audit

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
	"github.com/medallia/express-sequencer/test/framework/stuck"
	"github.com/medallia/express-sequencer/test/framework/tenant"
)

var (
	harness *controlplane.Harness
	cluster *controlplane.Cluster
	tenants tenant.Suite
	// watches breaks the auditor's watches of Express nodes on demand.
	watches = &controlplane.WatchBreaker{Resources: []string{"/backends", "/frontends"}}
	// broken is how the operator breaks the contract in each namespace;
	// readyAfter is how long its pods take to become Ready (200 ms by
	// default).
	broken     expressoperator.PerNamespace
	readyAfter sync.Map
	// builds are the nodes whose next build never becomes Ready.
	builds stuck.Builds
	// operator is the simulated Express operator.
	operator *expressoperator.Operator
)

// wouldHoldGrace is the suite's: a would-have-held the sequencer's plan
// ends less than this after the target started is within its reaction
// time on these shared cores.
const wouldHoldGrace = 2 * time.Second

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
	if harness, err = controlplane.NewHarness(controlplane.TestLogger(), func(o *app.Options) {
		// A tenant's updates here land within milliseconds of each other.
		o.Grouping.SettleTime = 300 * time.Millisecond
		o.WouldHoldGrace = wouldHoldGrace
		// The sequencer's scoped read and the pod webhook's read by name
		// (experimental, off by default) run here, judged by the auditor
		// and the suite's order checks.
		o.ScopedReads, o.PodReadsByName = true, true
		o.AuditorTransport = watches.Wrap
	}); err != nil {
		return 0, err
	}
	defer func() { _ = harness.Stop() }()
	if cluster, err = harness.StartCluster(2); err != nil {
		return 0, err
	}
	defer func() { _ = cluster.Stop() }()
	pods, err := controlplane.WatchPods(context.Background(), harness.Config)
	if err != nil {
		return 0, err
	}
	tenants = tenant.Suite{Client: harness.Client, Pods: pods, Prefix: "audit-", Poll: 50 * time.Millisecond}
	operator = &expressoperator.Operator{StartAfter: 50 * time.Millisecond, ReadyAfter: 200 * time.Millisecond,
		Broken: broken.Of, Stuck: builds.Of,
		ReadyAfterOf: func(n v2alpha1.Node) time.Duration {
			d, _ := readyAfter.Load(n.GetNamespace())
			out, _ := d.(time.Duration)
			return out
		}}
	stop, err := harness.StartController(operator.SetupWithManager)
	if err != nil {
		return 0, err
	}
	defer stop()
	return m.Run(), nil
}

// namespace creates a namespace whose operator breaks the contract as b
// says, labelled with labels.
func namespace(t *testing.T, b expressoperator.Breakage, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "audit-", Labels: labels}}
	require.NoError(t, harness.Client.Create(context.Background(), ns))
	broken.Set(ns.Name, b)
	return ns.Name
}

// counted reads a counter of the auditor's, summed over its labels.
func counted(t *testing.T, name string) float64 {
	t.Helper()
	n, err := auditmetrics.Sum(name)
	require.NoError(t, err)
	return n
}

// judged waits until the auditor has judged every pod creation it saw.
func judged(t *testing.T) {
	t.Helper()
	require.NoError(t, auditmetrics.WaitJudged(30*time.Second))
}
