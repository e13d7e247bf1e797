// Package integration runs whole rollouts end to end on Kubernetes' own
// control loops: the real webhooks and the sequencer on kube-apiserver +
// etcd, beside kube-controller-manager (the StatefulSet controller, the
// garbage collector), kube-scheduler and KWOK as the kubelet of fake Nodes.
// The Express operator's part is expressoperator (one StatefulSet per
// node); every pod is created by a StatefulSet, scheduled by the scheduler
// and made Ready by KWOK. The tests check the order nodes were rolled in,
// and what the sequencer said, across restarts, failovers, lagging caches,
// least privilege and Argo CD's health.
package integration

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
	"github.com/medallia/express-sequencer/test/framework/stuck"
	"github.com/medallia/express-sequencer/test/framework/tenant"
)

const (
	v1 = "express-e689.151"
	v2 = "express-e689.154"
)

var (
	// tenants makes the suite's tenants.
	tenants tenant.Suite
	// harness serves the webhooks; the sequencer runs in managers of its
	// own so tests can stop and start it while admission keeps working.
	harness *controlplane.Harness
	cluster *controlplane.Cluster
	pods    *controlplane.PodLog

	// builds are the nodes whose next build never becomes Ready (stick,
	// unstick).
	builds stuck.Builds
	// replicas are the pods of a node ("namespace/name"), 1 unless set.
	replicasMu sync.Mutex
	replicas   = map[string]int32{}
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
	if harness, err = controlplane.NewHarness(logr.Discard(), func(o *app.Options) {
		settings(o) // the webhooks judge releases with the sequencer's settings
		o.Sequencer = false
		o.SequencerUsers = []string{leastPrivilegeUser} // the sequencer of the RBAC test runs as its own user
	}); err != nil {
		return 0, err
	}
	defer func() {
		if err := harness.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
	}()
	if cluster, err = harness.StartCluster(2); err != nil {
		return 0, err
	}
	defer func() { _ = cluster.Stop() }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if pods, err = controlplane.WatchPods(ctx, harness.Config); err != nil {
		return 0, err
	}
	tenants = tenant.Suite{Client: harness.Client, Pods: pods, Prefix: "rollout-"}
	// A pod is Ready half a second after it starts: the tests that act while
	// a node rolls (take the next one down, stop the sequencer) have that
	// long to land first, on a loaded machine too.
	op := &expressoperator.Operator{StartAfter: 50 * time.Millisecond, ReadyAfter: 500 * time.Millisecond,
		Stuck: builds.Of,
		Replicas: func(n v2alpha1.Node) int32 {
			replicasMu.Lock()
			defer replicasMu.Unlock()
			return replicas[n.GetNamespace()+"/"+n.GetName()]
		}}
	stopOp, err := harness.StartController(op.SetupWithManager)
	if err != nil {
		return 0, err
	}
	defer stopOp()
	return m.Run(), nil
}

// grouping is the suite's change grouping, the webhooks' and every
// sequencer's (one test runs a sequencer with the default flags, whose
// holds are longer: the webhooks then judge its releases with shorter
// ones, which lets them through): updates here land within milliseconds
// of each other.
var grouping = rollout.Grouping{LandingTimeout: rollout.DefaultGrouping.LandingTimeout, SettleTime: 300 * time.Millisecond, SettleCap: 5 * time.Second}

func settings(o *app.Options) { o.Grouping = grouping }

// pastSettle waits until the settle hold of a change just made has ended.
func pastSettle() { time.Sleep(grouping.SettleTime + 200*time.Millisecond) }

// startSequencer runs a sequencer-only express-sequencer until the test ends
// (or stop is called).
func startSequencer(t *testing.T, edits ...func(*app.Options)) (stop func()) {
	t.Helper()
	o := harness.ManagerOptions("", logr.Discard())
	o.Webhooks = false
	o.ProgressDeadline = time.Minute
	settings(&o)
	for _, e := range edits {
		e(&o)
	}
	_, stopManager, err := harness.StartManager(o)
	require.NoError(t, err)
	var once sync.Once
	t.Cleanup(func() { once.Do(stopManager) })
	return func() { once.Do(stopManager) }
}

func namespace(t *testing.T) string { return tenants.Namespace(t) }

func key(i int) string { return tenant.Key(i) }

func node(ns, k string) v2alpha1.Node { return tenant.Node(ns, k) }

// createTenant creates be, fe1…fe(size-1) at v1, as the chart does.
func createTenant(t *testing.T, ns string, size int, edit func(k string, s *v2alpha1.NodeSpec)) {
	t.Helper()
	tenants.Create(t, ns, size, v1, edit)
}

// settledTenant creates a tenant of size nodes in a new namespace, waits
// until it is provisioned, and returns the namespace and how many pods have
// started there so far.
func settledTenant(t *testing.T, size int) (ns string, mark int) {
	t.Helper()
	ns = namespace(t)
	createTenant(t, ns, size, nil)
	waitSettled(t, ns, size)
	return ns, len(startedIn(ns))
}

func update(t *testing.T, ns string, edit func(v2alpha1.Node), keys ...string) {
	t.Helper()
	tenants.Update(t, ns, edit, keys...)
}

func setVersion(t *testing.T, ns, version string, keys ...string) {
	t.Helper()
	tenants.SetVersion(t, ns, version, keys...)
}

func setUp(t *testing.T, ns string, up bool, keys ...string) {
	t.Helper()
	update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(up) }, keys...)
}

func keys(size int) []string { return tenant.Keys(size) }

// waitSettled waits until the tenant of size nodes has settled (tenant.Suite.WaitSettled).
func waitSettled(t *testing.T, ns string, size int) {
	t.Helper()
	tenants.WaitSettled(t, ns, size, 90*time.Second, func() string { return fmt.Sprint(startedIn(ns)) })
}

// allPods reports whether every StatefulSet of ns has as many pods Ready
// as it wants.
func allPods(ns string) bool {
	return controlplane.StatefulSetsReady(context.Background(), harness.Client, ns)
}

func dump(t *testing.T, ns string) {
	t.Helper()
	tenants.Dump(t, ns)
}

func condition(n v2alpha1.Node) *metav1.Condition { return tenant.Condition(n) }

func waitFor(timeout time.Duration, f func() bool) bool { return tenants.WaitFor(timeout, f) }

// started returns every start of a pod in ns (bound to a Node by the
// scheduler: created schedulable, or its scheduling gates gone), in order.
func started(ns string) []controlplane.PodEvent { return pods.Bound(ns) }

// startedIn returns the nodes whose pods started in ns, one per pod, in order.
func startedIn(ns string) []string {
	var out []string
	for _, e := range started(ns) {
		out = append(out, e.Node)
	}
	return out
}

// startedSince returns the node keys of the pods started in ns after the
// first mark starts.
func startedSince(ns string, mark int) string {
	names := startedIn(ns)
	out := make([]string, 0, len(names))
	for _, s := range names[mark:] {
		out = append(out, strings.TrimPrefix(s, "acme-"))
	}
	return strings.Join(out, " ")
}

// assertEachStartedAfterThePreviousWasReady checks that every pod started in
// ns after the first mark starts did so after the pod started before it was
// Ready.
func assertEachStartedAfterThePreviousWasReady(t *testing.T, ns string, mark int) {
	t.Helper()
	events := pods.Since(ns, time.Time{})
	readyAt := map[string]time.Time{} // pod UID → Ready
	for _, e := range events {
		if e.Ready {
			readyAt[string(e.UID)] = e.At
		}
	}
	starts := started(ns)
	for i := mark + 1; i < len(starts); i++ {
		prev, cur := starts[i-1], starts[i]
		ready, ok := readyAt[string(prev.UID)]
		if !assert.True(t, ok, "%s (%s) became Ready", prev.Pod, prev.Node) {
			continue
		}
		assert.False(t, cur.At.Before(ready), "%s started (%s) before %s was Ready (%s)", cur.Pod,
			cur.At.Format(time.StampMilli), prev.Pod, ready.Format(time.StampMilli))
	}
}

// stick makes the next build of node k in ns one that runs and never becomes
// Ready (its next pod template is held from KWOK's pod-ready stage).
func stick(ns, k string) { builds.Stick(ns, "acme-"+k) }

// unstick lets node k's held pods become Ready: the hold goes from every
// pod of the node, now and from any its StatefulSet creates later.
func unstick(t *testing.T, ns, k string) {
	t.Helper()
	builds.Unstick(t, harness.Client, ns, "acme-"+k)
}

// evict deletes every pod of the nodes in one call, as a lost machine
// takes them: their StatefulSets recreate them under the same names.
func evict(t *testing.T, ns string, keys ...string) {
	t.Helper()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = "acme-" + k
	}
	in, err := labels.NewRequirement(v2alpha1.LabelNode, selection.In, names)
	require.NoError(t, err)
	require.NoError(t, harness.Client.DeleteAllOf(context.Background(), &corev1.Pod{}, client.InNamespace(ns),
		client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*in)}))
}

// crash turns every pod of the nodes CrashLoopBackOff in place (KWOK's
// pod-crash-loop stage); mend deletes crashed pods for their StatefulSets
// to recreate, as an operator or a person fixing them would.
func crash(t *testing.T, ns string, keys ...string) {
	t.Helper()
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = "acme-" + k
	}
	require.NoError(t, cluster.Crash(context.Background(), ns, names...))
}

func mend(t *testing.T, ns string) {
	t.Helper()
	require.NoError(t, cluster.Mend(context.Background(), ns))
}
