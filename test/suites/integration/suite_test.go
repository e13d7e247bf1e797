// Package rollout runs whole rollouts end to end: the real webhooks and the
// sequencer on a real kube-apiserver + etcd, with the simulated Express
// operator rolling pods, and checks the order nodes were rolled in.
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
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/testing/simoperator"
)

const (
	v1 = "express-e689.151"
	v2 = "express-e689.154"
)

var (
	// harness serves the webhooks; the sequencer runs in managers of its
	// own so tests can stop and start it while admission keeps working.
	harness *controlplane.Harness
	op      *simoperator.Operator
)

func TestMain(m *testing.M) {
	var err error
	if harness, err = controlplane.NewHarness(logr.Discard(), func(o *app.Options) {
		o.Sequencer = false
		o.SequencerUsers = []string{leastPrivilegeUser} // the sequencer of the RBAC test runs as its own user
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// Every pod is owned by its node's StatefulSet, as the Express
	// operator's are: the sequencer reads them on every fresh read.
	op = &simoperator.Operator{ReadyAfter: 150 * time.Millisecond, RecoverAfter: 300 * time.Millisecond, StatefulSets: true}
	stopOp, err := harness.StartOperator(op)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		_ = harness.Stop()
		os.Exit(1)
	}
	code := m.Run()
	stopOp()
	if err := harness.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
	}
	os.Exit(code)
}

// startSequencer runs a sequencer-only express-sequencer until the test ends
// (or stop is called).
func startSequencer(t *testing.T, edits ...func(*app.Options)) (stop func()) {
	t.Helper()
	o := harness.ManagerOptions("", logr.Discard())
	o.Webhooks = false
	o.ProgressDeadline = time.Minute
	o.Grouping.SettleTime = 300 * time.Millisecond // updates here land within milliseconds of each other
	for _, e := range edits {
		e(&o)
	}
	_, stopManager, err := harness.StartManager(o)
	require.NoError(t, err)
	var once sync.Once
	t.Cleanup(func() { once.Do(stopManager) })
	return func() { once.Do(stopManager) }
}

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "rollout-"}}
	require.NoError(t, harness.Client.Create(context.Background(), ns))
	return ns.Name
}

func key(i int) string {
	if i == 0 {
		return "be"
	}
	return fmt.Sprintf("fe%d", i)
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

// createTenant creates be, fe1…fe(size-1) at version, as the chart does.
func createTenant(t *testing.T, ns string, size int, edit func(k string, s *v2alpha1.NodeSpec)) {
	t.Helper()
	for i := 0; i < size; i++ {
		n := node(ns, key(i))
		*n.NodeSpec() = v2alpha1.NodeSpec{
			ClusterConfig:  v2alpha1.ClusterConfig{ClusterName: "acme", TenantID: "123634", TenantName: "acme"},
			ExpressVersion: v1,
		}
		if edit != nil {
			edit(key(i), n.NodeSpec())
		}
		require.NoError(t, harness.Client.Create(context.Background(), n))
	}
}

// settledTenant creates a tenant of size nodes in a new namespace, waits
// until it is provisioned, and returns the namespace and how many rollouts
// the operator has started there so far.
func settledTenant(t *testing.T, size int) (ns string, mark int) {
	t.Helper()
	ns = namespace(t)
	createTenant(t, ns, size, nil)
	waitSettled(t, ns, size)
	return ns, len(op.StartedIn(ns))
}

// update changes nodes through the API server (and so the webhooks),
// retrying on conflicts as kubectl does.
func update(t *testing.T, ns string, edit func(v2alpha1.Node), keys ...string) {
	t.Helper()
	for _, k := range keys {
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

func setVersion(t *testing.T, ns, version string, keys ...string) {
	t.Helper()
	update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().ExpressVersion = version }, keys...)
}

func setUp(t *testing.T, ns string, up bool, keys ...string) {
	t.Helper()
	update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(up) }, keys...)
}

func keys(size int) []string {
	out := make([]string, size)
	for i := range out {
		out[i] = key(i)
	}
	return out
}

// waitSettled waits until every up node of the tenant is ungated, Ready on
// its target, and reported RolloutComplete, and every down node has no pods.
func waitSettled(t *testing.T, ns string, size int) {
	t.Helper()
	var last string
	ok := waitFor(60*time.Second, func() bool {
		nodes, err := controlplane.Nodes(context.Background(), harness.Client, ns)
		if err != nil || len(nodes) < size {
			return false
		}
		done, why, err := controlplane.Settled(context.Background(), harness.Client, ns)
		last = why
		return err == nil && done
	})
	if !ok {
		dump(t, ns)
	}
	require.True(t, ok, "tenant %s did not settle: %s; rollouts so far: %v", ns, last, op.StartedIn(ns))
}

// dump logs the namespace's pods and the operator's state, when a tenant
// did not settle.
func dump(t *testing.T, ns string) {
	t.Helper()
	var pods corev1.PodList
	_ = harness.Client.List(context.Background(), &pods, client.InNamespace(ns))
	for _, p := range pods.Items {
		t.Logf("pod %s labels=%v scheduling gates=%v conditions=%v deleting=%v", p.Name, p.Labels, p.Spec.SchedulingGates, p.Status.Conditions, p.DeletionTimestamp != nil)
	}
	t.Logf("simulated operator:\n%s", op.State(ns))
}

func condition(n v2alpha1.Node) *metav1.Condition {
	for i, c := range n.NodeStatus().Conditions {
		if c.Type == v2alpha1.ConditionPrerequisitesReady {
			return &n.NodeStatus().Conditions[i]
		}
	}
	return nil
}

func waitFor(timeout time.Duration, f func() bool) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if f() {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// startedSince returns the node keys the operator started rolling in ns
// after mark rollouts.
func startedSince(ns string, mark int) string {
	started := op.StartedIn(ns)
	out := make([]string, 0, len(started))
	for _, s := range started[mark:] {
		out = append(out, strings.TrimPrefix(s, "acme-"))
	}
	return strings.Join(out, " ")
}
