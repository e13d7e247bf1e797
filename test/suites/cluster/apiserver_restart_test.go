package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// gatesRemoved is the sequencer's count of node gates it removed
// (express_sequencer_releases_total, every reason).
func gatesRemoved(t *testing.T) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	require.NoError(t, err)
	total := 0.0
	for _, f := range families {
		if f.GetName() == "express_sequencer_releases_total" {
			for _, m := range f.GetMetric() {
				total += m.GetCounter().GetValue()
			}
		}
	}
	return total
}

// kube-apiserver is restarted (etcd kept) while a change to all nodes of
// several tenants rolls: every client's watches end and its requests fail
// until the new one answers. An update made meanwhile fails with a clear
// error and succeeds when retried; the sequencer, the Express operator,
// kube-controller-manager, kube-scheduler and KWOK reconnect by
// themselves; every tenant converges in its order (fe1, fe2, be, fe3, each
// after the last was Ready), and each gate is removed once.
func TestAKubeAPIServerRestartedMidRolloutLosesNothingAndKeepsTheOrder(t *testing.T) {
	ctx := context.Background()
	const tenants = 3
	var nss []string
	for range tenants {
		nss = append(nss, settledTenant(t, 4, 1))
	}
	before := gatesRemoved(t)
	mark := time.Now()
	for _, ns := range nss {
		setVersion(t, ns, v2, keys(4)...)
	}
	waitReleased(t, nss[0], "fe1")

	restarted := make(chan error, 1)
	go func() { restarted <- harness.RestartAPIServer(ctx) }()
	// An update while no API server answers: a clear error, and the same
	// update succeeds once it is back.
	fe3 := node(nss[0], "fe3")
	var failed error
	require.True(t, waitFor(30*time.Second, func() bool {
		failed = harness.Client.Get(ctx, client.ObjectKeyFromObject(fe3), fe3)
		return failed != nil
	}), "the API server stops answering")
	t.Logf("a read while kube-apiserver restarts: %v", failed)
	require.NoError(t, <-restarted, "kube-apiserver answers again")
	update(t, nss[0], func(n v2alpha1.Node) {
		if n.GetLabels() == nil {
			n.SetLabels(map[string]string{})
		}
		n.GetLabels()["retried"] = "true"
	}, "fe3")

	// Each client's watches come back after its own backoff (client-go's
	// reflectors wait up to 30 s between tries): more time than a rollout.
	back := time.Now()
	require.True(t, waitFor(5*time.Minute, func() bool {
		for _, ns := range nss {
			if done, _, err := controlplane.Settled(ctx, harness.Client, ns); err != nil || !done || !allPods(ns) {
				return false
			}
		}
		return true
	}), "every tenant settles after the restart")
	t.Logf("every tenant settled %s after kube-apiserver answered again", time.Since(back).Round(time.Second))
	for _, ns := range nss {
		waitSettled(t, ns)
		assert.Equal(t, "fe1 fe2 be fe3", starts(ns, mark), "tenant %s", ns)
		eachAfterTheLast(t, ns, mark, "fe1", "fe2", "be", "fe3")
	}
	assert.Equal(t, float64(tenants*4), gatesRemoved(t)-before, "each node's gate removed once")
}
