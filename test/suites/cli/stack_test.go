package cli

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"

	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
)

// realStack runs Kubernetes' own control loops beside cp —
// kube-controller-manager, kube-scheduler, and KWOK as the kubelet of two
// fake Nodes — with the Express operator's part (expressoperator: one
// StatefulSet per node), and records the Express pods as they move, until
// stop is called.
func realStack(cp *controlplane.ControlPlane) (pods *controlplane.PodLog, stop func(), err error) {
	cluster, err := cp.StartCluster(2)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	stops := []func(){func() { _ = cluster.Stop() }, cancel}
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if pods, err = controlplane.WatchPods(ctx, cp.Config); err != nil {
		stop()
		return nil, nil, err
	}
	op := &expressoperator.Operator{StartAfter: 50 * time.Millisecond, ReadyAfter: 150 * time.Millisecond}
	stopOp, err := cp.StartController(op.SetupWithManager)
	if err != nil {
		stop()
		return nil, nil, err
	}
	stops = append(stops, stopOp)
	return pods, stop, nil
}

// startsIn returns the nodes whose pods were bound to a Node in ns, one
// per pod, in order.
func startsIn(pods *controlplane.PodLog, ns string) []string {
	var out []string
	for _, e := range pods.Bound(ns) {
		out = append(out, e.Node)
	}
	return out
}

// twoReplicas starts two replicas of express-sequencer on cp as in a
// cluster with --cert-mode=self-signed: both serve the webhooks from one
// shared CA, one leads the sequencer (lease 2 s). The first is the leader
// and serves on cp.WebhookPort; the second serves on portB.
func twoReplicas(t *testing.T, cp *controlplane.ControlPlane, lease string) (portB int, stopA, stopB func()) {
	t.Helper()
	replica := func(port int) app.Options {
		o := cp.ManagerOptions(t.TempDir(), logr.Discard())
		o.WebhookPort = port
		o.CASecret = "default/express-sequencer-webhook-ca"
		o.LeaderElect, o.LeaderElectionNS, o.LeaderElectionID = true, "default", lease
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 2*time.Second, 1500*time.Millisecond, 200*time.Millisecond
		o.Grouping.SettleTime = 300 * time.Millisecond
		return o
	}
	leader, stopA, err := cp.StartManager(replica(cp.WebhookPort))
	require.NoError(t, err)
	<-leader.Elected()
	portB, err = controlplane.FreePort()
	require.NoError(t, err)
	_, stopB, err = cp.StartManager(replica(portB))
	require.NoError(t, err)
	return portB, stopA, stopB
}
