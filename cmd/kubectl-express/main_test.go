package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/golden"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// shared is a control plane with the webhooks (no sequencer, so the state
// stays as the test sets it) and a tenant caught mid-upgrade: fe1 released
// and rolling, fe2 down, the rest gated.
var shared = controlplane.Lazy{
	Edits: []func(*app.Options){controlplane.WebhooksOnly, controlplane.HandReleases},
	Setup: func(h *controlplane.Harness) error { return upgradeInProgress(context.Background(), h.Client) },
}

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

const ns = "plugin-test"

// cluster returns a kubeconfig for the shared control plane.
func cluster(t *testing.T) string {
	t.Helper()
	path, err := shared.Get(t).KubeconfigFile(t.TempDir())
	require.NoError(t, err)
	return path
}

func upgradeInProgress(ctx context.Context, c client.Client) error {
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	keys := []string{"be", "fe1", "fe2", "fe3", "fe4"}
	nodes := map[string]v2alpha1.Node{}
	// A tenant Ready on express-e689.151, each node released for it…
	for i, key := range keys {
		kind := v2alpha1.KindFrontend
		if i == 0 {
			kind = v2alpha1.KindBackend
		}
		n := v2alpha1.NewNode(kind)
		n.SetName("acme-" + key)
		n.SetNamespace(ns)
		*n.NodeSpec() = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "acme"}, ExpressVersion: "express-e689.151"}
		if key == "fe2" {
			n.NodeSpec().Up = ptr.To(false)
		}
		if err := c.Create(ctx, n); err != nil {
			return err
		}
		nodes[key] = n
		if key == "fe2" {
			continue
		}
		if err := releaseRecorded(ctx, c, n); err != nil {
			return err
		}
		if err := runningPod(ctx, c, n, "acme-"+key+"-0", corev1.ConditionTrue); err != nil {
			return err
		}
	}
	// …then changed to express-e689.154: fe1 released and rolling, fe2
	// down, the rest gated.
	for _, key := range keys {
		n := nodes[key]
		if err := c.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
			return err
		}
		n.NodeSpec().ExpressVersion = "express-e689.154"
		if err := c.Update(ctx, n); err != nil {
			return err
		}
	}
	fe1 := nodes["fe1"]
	if err := releaseRecorded(ctx, c, fe1); err != nil {
		return err
	}
	if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1-0", Namespace: ns}}); err != nil {
		return err
	}
	return runningPod(ctx, c, fe1, "acme-fe1-1", corev1.ConditionFalse)
}

// releaseRecorded removes the gate as the sequencer does, recording the
// released target in the same patch.
func releaseRecorded(ctx context.Context, c client.Client, n v2alpha1.Node) error {
	base := n.DeepCopyObject().(client.Object)
	n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
	ann := n.GetAnnotations()
	ann[v2alpha1.AnnotationReleasedTarget] = ann[v2alpha1.AnnotationTargetHash]
	ann[v2alpha1.AnnotationReleasedGeneration] = strconv.FormatInt(n.GetGeneration()+1, 10)
	return c.Patch(ctx, n, client.MergeFrom(base), client.FieldOwner(v2alpha1.FieldManager))
}

// runningPod creates the node's pod for its current target, as the Express
// operator does, with the given Ready status.
func runningPod(ctx context.Context, c client.Client, n v2alpha1.Node, name string, ready corev1.ConditionStatus) error {
	return runningPodOn(ctx, c, n, name, "", ready)
}

// runningPodOn is a pod of node n bound to machine (none: unbound), its
// status Ready or not.
func runningPodOn(ctx context.Context, c client.Client, n v2alpha1.Node, name, machine string, ready corev1.ConditionStatus) error {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: n.GetNamespace(), Labels: map[string]string{
			v2alpha1.LabelNode: n.GetName(), v2alpha1.LabelExpressVersion: n.NodeSpec().ExpressVersion,
			v2alpha1.LabelTargetHash: n.GetAnnotations()[v2alpha1.AnnotationTargetHash]}},
		Spec: corev1.PodSpec{NodeName: machine, Containers: []corev1.Container{{Name: "express", Image: "express"}}},
	}
	if err := c.Create(ctx, pod); err != nil {
		return err
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
	return c.Status().Update(ctx, pod)
}

// run runs the plugin with args and returns its output and error output.
// The fixture's change was made seconds before; its plans are those of the
// tenant once the settle hold is over (--settle-time=0) unless args give a
// settle time: TestALivePlanHoldsAChangeAsTheSequencerDoes shows the hold.
func run(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := newRootCommand(strings.NewReader(stdin), &out, &errOut)
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--settle-time") }) {
		args = append(args, "--settle-time=0")
	}
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), errOut.String(), err
}

func TestPlanShowsWhoWaitsForWhom(t *testing.T) {
	kubeconfig := cluster(t)
	for _, format := range []string{"table", "json", "yaml", "mermaid"} {
		t.Run(format, func(t *testing.T) {
			out, _, err := run(t, "", "plan", "acme", "--kubeconfig", kubeconfig, "-n", ns, "-o", format)
			require.NoError(t, err)
			golden.Assert(t, "plan."+format, out)
		})
	}
	out, _, err := run(t, "", "plan", "--kubeconfig", kubeconfig, "-n", ns)
	require.NoError(t, err)
	assert.Contains(t, out, "Tenant acme", "the only tenant of the namespace needs no name")
	_, _, err = run(t, "", "plan", "zeta", "--kubeconfig", kubeconfig, "-n", ns)
	assert.ErrorContains(t, err, `no tenant "zeta" in namespace "plugin-test"`)
	_, _, err = run(t, "", "plan", "-o", "xml", "--kubeconfig", kubeconfig, "-n", ns)
	assert.ErrorContains(t, err, "want table, json, yaml or mermaid")
}

// A live plan holds a tenant as the sequencer running with the same flags
// does: the fixture's change, made moments ago on a tenant without
// rollout-id, is still held by a settle time of an hour, and explain says
// what holds it rather than blaming a pause.
func TestALivePlanHoldsAChangeAsTheSequencerDoes(t *testing.T) {
	kubeconfig := cluster(t)
	out, _, err := run(t, "", "plan", "acme", "--kubeconfig", kubeconfig, "-n", ns, "-o", "json", "--settle-time=1h")
	require.NoError(t, err)
	var rows []row
	require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
	reasons := map[string]string{}
	for _, r := range rows {
		reasons[r.Node] = r.Reason
	}
	assert.Equal(t, v2alpha1.ReasonSettling, reasons["acme-fe4"], out)
	assert.Equal(t, v2alpha1.ReasonSettling, reasons["acme-be"], out)

	out, _, err = run(t, "", "explain", "acme-fe4", "--kubeconfig", kubeconfig, "-n", ns, "--settle-time=1h")
	require.NoError(t, err)
	assert.Contains(t, out, "No node holds it; Settling does")
	assert.NotContains(t, out, v2alpha1.AnnotationPauseRollout)
}

// A live plan uses the installation's orders: the Helm chart's ConfigMap
// in --sequencer-namespace when it exists, --order-config over it, the
// built-in orders when there is none.
func TestALivePlanUsesTheInstallationsOrders(t *testing.T) {
	kubeconfig := cluster(t)
	ctx, c := context.Background(), shared.Get(t).Client
	const installed = "orders-test"
	require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: installed}}))
	require.NoError(t, c.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: ordersConfigMap, Namespace: installed},
		Data:       map[string]string{"orders.yaml": "provisioningOrder: [be]\nupgradeOrder: [be, fe1]\n"},
	}))
	file := filepath.Join(t.TempDir(), "orders.yaml")
	require.NoError(t, os.WriteFile(file, []byte("provisioningOrder: [be]\nupgradeOrder: [fe1, fe3, be]\n"), 0o600))
	upgradePosition := func(args ...string) map[string]int {
		out, _, err := run(t, "", append([]string{"plan", "acme", "--kubeconfig", kubeconfig, "-n", ns, "-o", "json"}, args...)...)
		require.NoError(t, err)
		var rows []row
		require.NoError(t, json.Unmarshal([]byte(out), &rows), out)
		pos := map[string]int{}
		for _, r := range rows {
			pos[r.Node] = r.Upgrade
		}
		for _, node := range []string{"acme-be", "acme-fe1", "acme-fe3"} {
			require.NotZero(t, pos[node], "%s has an upgrade position: %s", node, out)
		}
		return pos
	}
	builtin := upgradePosition("--sequencer-namespace", "nowhere")
	fromConfigMap := upgradePosition("--sequencer-namespace", installed)
	fromFile := upgradePosition("--sequencer-namespace", installed, "--order-config", file)
	assert.Less(t, builtin["acme-fe1"], builtin["acme-be"], "built in: fe1, fe2, be")
	assert.Less(t, fromConfigMap["acme-be"], fromConfigMap["acme-fe1"], "the ConfigMap's: be, fe1")
	assert.Less(t, fromFile["acme-fe3"], fromFile["acme-be"], "--order-config's: fe1, fe3, be")
}

func TestExplainFollowsTheChain(t *testing.T) {
	kubeconfig := cluster(t)
	out, _, err := run(t, "", "explain", "acme-fe4", "--kubeconfig", kubeconfig, "-n", ns)
	require.NoError(t, err)
	golden.Assert(t, "explain.fe4", out)
	_, _, err = run(t, "", "explain", "acme-fe9", "--kubeconfig", kubeconfig, "-n", ns)
	assert.ErrorContains(t, err, `no Backend or Frontend "acme-fe9" in namespace "plugin-test"`)
}

func TestPauseAndResumeSetAndClearTheAnnotation(t *testing.T) {
	kubeconfig := cluster(t)
	annotation := func() (string, bool) {
		fe3 := &v2alpha1.Frontend{}
		require.NoError(t, shared.Get(t).Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "acme-fe3"}, fe3))
		v, ok := fe3.Annotations[v2alpha1.AnnotationPauseRollout]
		return v, ok
	}
	out, _, err := run(t, "", "pause", "acme-fe3", "--kubeconfig", kubeconfig, "-n", ns)
	require.NoError(t, err)
	assert.Equal(t, "Frontend/acme-fe3 paused\n", out)
	v, ok := annotation()
	assert.True(t, ok)
	assert.Equal(t, "true", v)

	out, _, err = run(t, "", "resume", "acme-fe3", "--kubeconfig", kubeconfig, "-n", ns)
	require.NoError(t, err)
	assert.Equal(t, "Frontend/acme-fe3 resumed\n", out)
	_, ok = annotation()
	assert.False(t, ok)
}

func TestDefaultsWorkOfflineWithTheWebhooksCode(t *testing.T) {
	out, errOut, err := run(t, "", "defaults", "-f", filepath.Join("testdata", "tenant.yaml"))
	require.NoError(t, err)
	golden.Assert(t, "defaults.tenant", out)
	assert.Empty(t, errOut, "defaults that name absent nodes are not warned about")

	data, err := os.ReadFile(filepath.Join("testdata", "tenant.yaml"))
	require.NoError(t, err)
	fromStdin, _, err := run(t, string(data), "defaults", "-f", "-")
	require.NoError(t, err)
	assert.Equal(t, out, fromStdin, "standard input reads the same")

	_, _, err = run(t, "", "defaults", "-f", filepath.Join("testdata", "cycle.yaml"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "acme-fe2 → acme-fe1 → acme-fe2 is a cycle")

	_, _, err = run(t, "", "defaults")
	assert.ErrorContains(t, err, "-f is required")
	_, _, err = run(t, "", "defaults", "-f", "testdata/none.yaml")
	assert.ErrorContains(t, err, "none.yaml")
}

// In a tenant with fe10 and more, acme-fe1 is not mistaken for part of
// acme-fe12: the chain runs all the way to the backend.
func TestExplainFollowsALongChainWithoutSeeingALoop(t *testing.T) {
	h := shared.Get(t)
	ctx := context.Background()
	const big = "plugin-test-twelve"
	require.NoError(t, h.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: big}}))
	for i := 0; i <= 12; i++ {
		kind, key := v2alpha1.KindFrontend, "fe"+strconv.Itoa(i)
		if i == 0 {
			kind, key = v2alpha1.KindBackend, "be"
		}
		n := v2alpha1.NewNode(kind)
		n.SetName("acme-" + key)
		n.SetNamespace(big)
		*n.NodeSpec() = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "acme"}, ExpressVersion: "express-e689.151"}
		require.NoError(t, h.Client.Create(ctx, n))
	}
	out, _, err := run(t, "", "explain", "acme-fe12", "--kubeconfig", cluster(t), "-n", big)
	require.NoError(t, err)
	assert.Contains(t, out, "chain:   acme-fe12 → acme-fe11 → acme-fe10 → acme-fe9 → acme-fe8 → acme-fe7 → acme-fe6 → acme-fe5 → acme-fe4 → acme-fe3 → acme-fe2 → acme-fe1 → acme-be\n")
	assert.NotContains(t, out, "(loop)")
}

// syncBuffer is a bytes.Buffer safe to read while the command writes.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// plan -w prints the plan again when the tenant changes, from a watch.
func TestPlanWatchPrintsTheChange(t *testing.T) {
	kubeconfig := cluster(t)
	out, stop := watching(t, "plan", "acme", "-w", "--kubeconfig", kubeconfig, "-n", ns, "--settle-time=0")
	require.Eventually(t, func() bool { return strings.Contains(out.String(), "Tenant acme") }, 10*time.Second, 20*time.Millisecond)
	require.NotContains(t, out.String(), "\n--- ")

	_, _, err := run(t, "", "pause", "acme-fe4", "--kubeconfig", kubeconfig, "-n", ns)
	require.NoError(t, err)
	defer func() { _, _, _ = run(t, "", "resume", "acme-fe4", "--kubeconfig", kubeconfig, "-n", ns) }()
	require.Eventually(t, func() bool {
		s := out.String()
		i := strings.Index(s, "\n--- ")
		return i >= 0 && strings.Contains(s[i:], "held by express.medallia.com/pause-rollout")
	}, 10*time.Second, 20*time.Millisecond, "the paused fe4 is printed: %s", out.String())
	stop()
}

// watching runs a command that watches (-w) until stop, which checks that
// it ends when its context does, without an error.
func watching(t *testing.T, args ...string) (out *syncBuffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	out = &syncBuffer{}
	cmd := newRootCommand(strings.NewReader(""), out, out)
	cmd.SetArgs(args)
	done := make(chan error, 1)
	go func() { done <- cmd.ExecuteContext(ctx) }()
	return out, func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			assert.NoError(t, err)
		case <-time.After(5 * time.Second):
			t.Fatalf("%s did not stop when its context ended", strings.Join(args, " "))
		}
	}
}

// -f takes a directory, and -R its subdirectories, through kubectl's own
// resource builder; the manifests read the same as from one file.
func TestDefaultsReadDirectoriesRecursively(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "tenant.yaml"))
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "nested"), 0o755))
	docs := strings.Split(string(data), "\n---")
	require.Greater(t, len(docs), 2)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(docs[0]), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nested", "b.yaml"), []byte(strings.Join(docs[1:], "\n---")), 0o600))

	flat, _, err := run(t, "", "defaults", "-f", dir)
	require.NoError(t, err)
	assert.Contains(t, flat, "kind: Backend")
	assert.NotContains(t, flat, "name: acme-fe1", "without -R, only the top directory")
	deep, _, err := run(t, "", "defaults", "-R", "-f", dir)
	require.NoError(t, err)
	whole, _, err := run(t, "", "defaults", "-f", filepath.Join("testdata", "tenant.yaml"))
	require.NoError(t, err)
	assert.Equal(t, whole, deep, "with -R, the nested file too, in order")
}

// A node may be named as kubectl names it: TYPE/NAME.
func TestNodesAreNamedAsKubectlNamesThem(t *testing.T) {
	kubeconfig := cluster(t)
	plain, _, err := run(t, "", "explain", "acme-fe4", "--kubeconfig", kubeconfig, "-n", ns)
	require.NoError(t, err)
	for _, name := range []string{"frontend/acme-fe4", "frontends/acme-fe4", "fe/acme-fe4", "frontend.express.medallia.com/acme-fe4"} {
		out, _, err := run(t, "", "explain", name, "--kubeconfig", kubeconfig, "-n", ns)
		require.NoError(t, err, name)
		assert.Equal(t, plain, out, name)
	}
	_, _, err = run(t, "", "explain", "backend/acme-fe4", "--kubeconfig", kubeconfig, "-n", ns)
	assert.ErrorContains(t, err, `no Backend "acme-fe4" in namespace "plugin-test"`)
	_, _, err = run(t, "", "explain", "pod/acme-fe4", "--kubeconfig", kubeconfig, "-n", ns)
	assert.ErrorContains(t, err, `the type must be backend or frontend (be, fe), not "pod"`)
}
