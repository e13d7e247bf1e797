package cluster

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
)

// kube-apiserver is killed and started again (etcd kept, and written to
// meanwhile, as through another kube-apiserver) in the middle of a change to all
// nodes of 50 tenants, some of them released: every client — the
// sequencer and the webhooks' caches, kube-controller-manager, the
// scheduler, KWOK, the Express operator — loses its connection and its
// watches. A kubectl apply made while it is down fails with kubectl's own
// word for it and goes through when run again. Every tenant then
// converges, each in its order, each node's pods started only after the
// node before it was Ready, and no node rolled twice.
func TestKubeAPIServerRestartedMidRolloutHoldsTheOrder(t *testing.T) {
	const tenants = 50
	namespaces := make([]string, tenants)
	for i := range namespaces {
		namespaces[i] = namespace(t)
		replicas.set(namespaces[i], 1)
		createNodes(t, namespaces[i], 3)
	}
	other := namespace(t)
	replicas.set(other, 1)
	createNodes(t, other, 3)
	for _, ns := range append(namespaces, other) {
		waitSettled(t, ns)
	}

	mark := time.Now()
	var wg sync.WaitGroup
	for _, ns := range namespaces {
		// With a rollout-id, as the tenant chart renders it: 50 tenants
		// changed at once on 2 cores land node by node over more than the
		// suite's 300 ms settle time, and without one a Backend whose
		// change landed first is, rightly, a change of its own.
		wg.Go(func() {
			update(t, ns, func(n v2alpha1.Node) {
				n.NodeSpec().ExpressVersion = v2
				n.GetAnnotations()[v2alpha1.AnnotationRolloutID] = "upgrade"
			}, keys(3)...)
		})
	}
	wg.Wait()
	waitReleased(t, namespaces[0], "fe1")

	listed, err := auditmetrics.Sum(auditmetrics.Relists)
	require.NoError(t, err)
	start, err := harness.StopAPIServer()
	require.NoError(t, err)
	down := time.Now()
	// A write through another kube-apiserver while this one is down: the
	// one started again fills its watch caches from a later revision than
	// any watch saw, and every watch is told 410 Gone and lists again. The
	// auditor's lists hand their objects over in no order of revision.
	require.NoError(t, harness.MoveEtcdRevision(context.Background()))
	kubeconfig, err := harness.KubeconfigFile(t.TempDir())
	require.NoError(t, err)
	manifest := filepath.Join(t.TempDir(), "fe2.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: express.medallia.com/v2alpha1
kind: Frontend
metadata:
  name: acme-fe2
  namespace: `+other+`
spec:
  expressVersion: `+v2+`
`), 0o600))
	apply := func() (string, error) {
		out, err := exec.Command(filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl"), "--kubeconfig", kubeconfig, "--request-timeout=10s",
			"apply", "--server-side", "--force-conflicts", "--field-manager=argocd-controller", "-f", manifest).CombinedOutput()
		return string(out), err
	}
	out, err := apply()
	assert.Error(t, err, "an apply while kube-apiserver is down fails")
	assert.Contains(t, out, "connection refused", "kubectl says the connection was refused: %s", out)
	time.Sleep(5*time.Second - time.Since(down))
	require.NoError(t, start())
	t.Logf("kube-apiserver down for %s", time.Since(down).Round(time.Millisecond))
	otherMark := time.Now()
	out, err = apply()
	require.NoError(t, err, "the apply run again goes through: %s", out)

	convergesWithTheScheduler(t, append(slices.Clone(namespaces), other))
	relisted, err := auditmetrics.Sum(auditmetrics.Relists)
	require.NoError(t, err)
	assert.Greater(t, relisted, listed, "the auditor's watches listed again (the suite's closing check: no violation counted)")
	for _, ns := range namespaces {
		waitSettled(t, ns)
		assert.Equal(t, "fe1 fe2 be", starts(ns, mark), "%s: each node rolled once, in order", ns)
		eachAfterTheLast(t, ns, mark, "fe1", "fe2", "be")
	}
	waitSettled(t, other)
	assert.Equal(t, "fe2", starts(other, otherMark), "the retried apply rolled fe2")
}

// convergesWithTheScheduler waits until every tenant of namespaces has
// settled. kube-scheduler can miss a pod created as kube-apiserver dies (a
// create that reached etcd, its watch event never sent; kubernetes#102790):
// the pod stays Pending, never tried, until the scheduler restarts. An
// Express pod in that state for 20 s gets the scheduler restarted once, as
// an operator would, and the test says so.
func convergesWithTheScheduler(t *testing.T, namespaces []string) {
	t.Helper()
	ctx := context.Background()
	restarted := false
	var unsettled map[string]string
	ok := waitFor(3*time.Minute, func() bool {
		unsettled = map[string]string{}
		var stuck []string
		for _, ns := range namespaces {
			done, why, err := controlplane.Settled(ctx, harness.Client, ns)
			if err != nil {
				why = err.Error()
			}
			if err != nil || !done {
				unsettled[ns] = why
			}
			var list corev1.PodList
			if harness.Client.List(ctx, &list, client.InNamespace(ns), client.HasLabels{v2alpha1.LabelNode}) != nil {
				continue
			}
			for _, p := range list.Items {
				if p.Spec.NodeName == "" && len(p.Spec.SchedulingGates) == 0 && len(p.Status.Conditions) == 0 && time.Since(p.CreationTimestamp.Time) > 20*time.Second {
					stuck = append(stuck, ns+"/"+p.Name)
				}
			}
		}
		if len(stuck) > 0 && !restarted {
			t.Logf("kube-scheduler never tried %v (20 s and more, no gate): restarting it", stuck)
			require.NoError(t, cluster.RestartScheduler())
			restarted = true
		}
		return len(unsettled) == 0
	})
	if !ok {
		for _, ns := range slices.Sorted(maps.Keys(unsettled)) {
			dump(t, ns)
		}
	}
	require.True(t, ok, "every tenant settles; not settled: %v", unsettled)
}
