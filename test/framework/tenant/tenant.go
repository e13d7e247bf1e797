// Package tenant is the test framework the suites share for the tenants
// they roll out on a real control plane: a namespace, a tenant of one
// Backend and its Frontends created as the chart does, changes made through
// the API server (and so the webhooks) as kubectl makes them, and waits
// until the tenant has settled. The integration, cluster and CLI suites use
// it; the operator conformance kit (package conformance) drives its nodes
// the same way, on any operator's kinds, with no test dependency.
package tenant

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// ClusterName is the tenants' clusterConfig.clusterName: their nodes are
// acme-be, acme-fe1, ….
const ClusterName = "acme"

// Suite makes the tenants of one test suite.
type Suite struct {
	// Client reaches the API server, through the webhooks.
	Client client.Client
	// Pods, when set, is the suite's pod log: a tenant that does not
	// settle is described with it.
	Pods *controlplane.PodLog
	// Prefix begins the names of the suite's namespaces.
	Prefix string
	// Poll is how often WaitFor looks (20 ms when 0).
	Poll time.Duration
}

// Namespace creates a namespace of the suite's and returns its name.
func (s Suite) Namespace(t testing.TB) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: s.Prefix}}
	require.NoError(t, s.Client.Create(context.Background(), ns))
	return ns.Name
}

// Key is the node key of the i-th node of a tenant: be, fe1, fe2, ….
func Key(i int) string {
	if i == 0 {
		return "be"
	}
	return fmt.Sprintf("fe%d", i)
}

// Keys are the node keys of a tenant of size nodes.
func Keys(size int) []string {
	out := make([]string, size)
	for i := range out {
		out[i] = Key(i)
	}
	return out
}

// Node is node k of the tenant in ns, as an empty object to read into.
func Node(ns, k string) v2alpha1.Node {
	kind := v2alpha1.KindFrontend
	if k == "be" {
		kind = v2alpha1.KindBackend
	}
	n := v2alpha1.NewNode(kind)
	n.SetName(ClusterName + "-" + k)
	n.SetNamespace(ns)
	return n
}

// Create creates be, fe1…fe(size-1) at version in ns, as the chart does,
// each edited by edit first (nil for none).
func (s Suite) Create(t testing.TB, ns string, size int, version string, edit func(k string, spec *v2alpha1.NodeSpec)) {
	t.Helper()
	for _, k := range Keys(size) {
		n := Node(ns, k)
		*n.NodeSpec() = v2alpha1.NodeSpec{
			ClusterConfig:  v2alpha1.ClusterConfig{ClusterName: ClusterName, TenantID: "123634", TenantName: ClusterName},
			ExpressVersion: version,
		}
		if edit != nil {
			edit(k, n.NodeSpec())
		}
		require.NoError(t, s.Client.Create(context.Background(), n))
	}
}

// Update changes nodes through the API server (and so the webhooks),
// retrying on conflicts as kubectl does, and on any other error for up to a
// minute (a webhook slow to answer on a loaded machine): it fails with the
// last error.
func (s Suite) Update(t testing.TB, ns string, edit func(v2alpha1.Node), keys ...string) {
	t.Helper()
	for _, k := range keys {
		try := func() error {
			n := Node(ns, k)
			if err := s.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n); err != nil {
				return err
			}
			edit(n)
			return s.Client.Update(context.Background(), n)
		}
		deadline := time.Now().Add(time.Minute)
		for err := try(); err != nil; err = try() {
			require.True(t, time.Now().Before(deadline), "updating %s/%s: %v", ns, Node(ns, k).GetName(), err)
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// SetMode labels namespace ns with the sequencing mode (v2alpha1.ModeAudit
// or ModeEnforce); "" removes the label, leaving the installation's default.
func SetMode(t testing.TB, c client.Client, ns, mode string) {
	t.Helper()
	var label any
	if mode != "" {
		label = mode
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{v2alpha1.LabelSequencing: label}}})
	require.NoError(t, err)
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}
	require.NoError(t, c.Patch(context.Background(), n, client.RawPatch(types.MergePatchType, patch)), "labelling namespace %s %q", ns, mode)
}

// SetMode labels the suite's namespace ns with the sequencing mode.
func (s Suite) SetMode(t testing.TB, ns, mode string) {
	t.Helper()
	SetMode(t, s.Client, ns, mode)
}

// SetVersion sets the expressVersion of nodes.
func (s Suite) SetVersion(t testing.TB, ns, version string, keys ...string) {
	t.Helper()
	s.Update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().ExpressVersion = version }, keys...)
}

// WaitFor polls f until it is true or timeout passes; it reports whether f
// became true.
func (s Suite) WaitFor(timeout time.Duration, f func() bool) bool {
	poll := s.Poll
	if poll <= 0 {
		poll = 20 * time.Millisecond
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if f() {
			return true
		}
		time.Sleep(poll)
	}
	return false
}

// WaitSettled waits, at most timeout, until ns holds at least size nodes,
// every up node ungated, Ready on its target and recorded RolloutComplete,
// every down node without pods, and every StatefulSet with the pods it
// wants Ready; otherwise it describes the tenant and fails t, saying what
// started so far (started, when set).
func (s Suite) WaitSettled(t testing.TB, ns string, size int, timeout time.Duration, started func() string) {
	t.Helper()
	ctx := context.Background()
	var why string
	ok := s.WaitFor(timeout, func() bool {
		if size > 0 {
			nodes, err := controlplane.Nodes(ctx, s.Client, ns)
			if err != nil || len(nodes) < size {
				why = fmt.Sprintf("%d of %d nodes exist", len(nodes), size)
				return false
			}
		}
		done, w, err := controlplane.Settled(ctx, s.Client, ns)
		why = w
		return err == nil && done && controlplane.StatefulSetsReady(ctx, s.Client, ns)
	})
	if !ok {
		s.Dump(t, ns)
	}
	so := ""
	if started != nil {
		so = started()
	}
	require.True(t, ok, "tenant %s did not settle: %s; pods started so far: %s", ns, why, so)
}

// Dump logs what the tenant's nodes, StatefulSets and pods say, for a
// tenant that did not settle.
func (s Suite) Dump(t testing.TB, ns string) {
	t.Helper()
	t.Log(strings.Join(controlplane.Describe(context.Background(), s.Client, s.Pods, ns), "\n"))
}

// Condition returns node n's PrerequisitesReady condition, nil when it has
// none.
func Condition(n v2alpha1.Node) *metav1.Condition {
	return meta.FindStatusCondition(n.NodeStatus().Conditions, v2alpha1.ConditionPrerequisitesReady)
}
