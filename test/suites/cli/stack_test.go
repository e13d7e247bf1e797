package cli

import (
	"context"
	"time"

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
