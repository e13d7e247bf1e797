package webhook_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// The control plane starts on first use, so that the fuzz target, which
// needs none, does not pay for it. Only the webhooks run: the gates they add
// stay for the tests to see.
var shared = controlplane.Lazy{Edits: []func(*app.Options){controlplane.WebhooksOnly, controlplane.HandReleases}}

func TestMain(m *testing.M) {
	code := m.Run()
	shared.Stop()
	os.Exit(code)
}

// env returns the shared control plane with express-sequencer serving its
// webhooks over TLS with self-signed certificates it injected itself.
func env(t *testing.T) *controlplane.Harness { return shared.Get(t) }

// namespace creates a namespace of the test's own.
func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "webhook-test-"}}
	require.NoError(t, env(t).Client.Create(context.Background(), ns))
	return ns.Name
}

// warningClient returns a client whose admission warnings are collected.
func warningClient(t *testing.T) (client.Client, *warnings) {
	t.Helper()
	w := &warnings{}
	cfg := rest.CopyConfig(env(t).Config)
	cfg.WarningHandler = w
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	return c, w
}

type warnings struct {
	mu   sync.Mutex
	list []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, text)
}

func (w *warnings) all() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.list...)
}

// seedTenant is the tenant of the user's values.yaml: instance acme, nodes
// be and fe1…fe4 all up, express-e689.151, no deploymentDependencies (the
// chart without allNodeConfig).
func seedTenant(ns string) []v2alpha1.Node {
	nodes := []v2alpha1.Node{seedNode(ns, "be")}
	for i := 1; i <= 4; i++ {
		nodes = append(nodes, seedNode(ns, fmt.Sprintf("fe%d", i)))
	}
	return nodes
}

func seedNode(ns, key string) v2alpha1.Node {
	kind := v2alpha1.KindFrontend
	if key == "be" {
		kind = v2alpha1.KindBackend
	}
	n := v2alpha1.NewNode(kind)
	n.SetName("acme-" + key)
	n.SetNamespace(ns)
	n.SetLabels(map[string]string{"express.medallia.com/source-deployer": "argocd"})
	*n.NodeSpec() = v2alpha1.NodeSpec{
		ClusterConfig:   v2alpha1.ClusterConfig{ClusterName: "acme", TenantID: "123634", TenantName: "acme"},
		ExpressVersion:  "express-e689.151",
		ConfigChangeset: "867fc47c2326a5b00893b3b0f3d2d7c66b634579",
	}
	return n
}

// release removes the sequencer's gate the way the sequencer does: as its
// field manager, recording the released target in the same patch.
func release(t *testing.T, c client.Client, n v2alpha1.Node) {
	t.Helper()
	base := n.DeepCopyObject().(v2alpha1.Node)
	n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
	ann := n.GetAnnotations()
	ann[v2alpha1.AnnotationReleasedTarget] = ann[v2alpha1.AnnotationTargetHash]
	ann[v2alpha1.AnnotationReleasedGeneration] = fmt.Sprint(n.GetGeneration() + 1)
	require.NoError(t, c.Patch(context.Background(), n, client.MergeFrom(base), client.FieldOwner(v2alpha1.FieldManager)))
	require.False(t, n.NodeSpec().HasGate(v2alpha1.GateSequencer))
}

func get(t *testing.T, n v2alpha1.Node) v2alpha1.Node {
	t.Helper()
	out := v2alpha1.NewNode(n.NodeKind())
	require.NoError(t, env(t).Client.Get(context.Background(), client.ObjectKeyFromObject(n), out))
	return out
}
