package main

import (
	"context"
	"fmt"
	"io"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
	"github.com/medallia/express-sequencer/internal/testing/simoperator"
)

// clusterNodes is how many fake Nodes KWOK plays the kubelet of.
const clusterNodes = 4

// startCluster runs the bench on Kubernetes' own control loops:
// kube-controller-manager, kube-scheduler and KWOK beside cp, the Express
// operator's part played by expressoperator (a StatefulSet per node, pods
// started and made Ready by KWOK at once). rec hears of every pod bound to
// a Node (a start), made Ready, and of every node's gate going, as the
// simulated operator tells it.
func startCluster(ctx context.Context, cp *controlplane.ControlPlane, rec *recorder, controllerQPS int, out io.Writer) (stop func(), err error) {
	var flags []string
	limit := "its default client rate limit"
	if controllerQPS > 0 {
		flags = []string{fmt.Sprintf("--kube-api-qps=%d", controllerQPS), fmt.Sprintf("--kube-api-burst=%d", controllerQPS*3/2)}
		limit = fmt.Sprintf("%d requests/s", controllerQPS)
	}
	fmt.Fprintf(out, "Starting kube-controller-manager (%s), kube-scheduler and KWOK with %d fake Nodes…\n", limit, clusterNodes)
	cluster, err := cp.StartClusterWith(clusterNodes, flags...)
	if err != nil {
		return nil, err
	}
	op := &expressoperator.Operator{}
	stopOp, err := cp.StartController(func(mgr ctrl.Manager) error {
		if err := simoperator.WatchUngated(mgr, rec.onUngated); err != nil {
			return err
		}
		return op.SetupWithManager(mgr)
	})
	if err != nil {
		_ = cluster.Stop()
		return nil, err
	}
	podCtx, stopPods := context.WithCancel(ctx)
	if _, err := controlplane.WatchPods(podCtx, cp.Config, rec.onPodEvent); err != nil {
		stopPods()
		stopOp()
		_ = cluster.Stop()
		return nil, err
	}
	return func() { stopPods(); stopOp(); _ = cluster.Stop() }, nil
}

// onPodEvent records a pod's step as the simulated operator's would be: a
// pod bound to a Node starts its node's rollout, a pod Ready makes the node
// Ready (one pod per node).
func (r *recorder) onPodEvent(e controlplane.PodEvent) {
	switch {
	case e.Terminating:
	case e.Ready:
		r.onReady(simoperator.Ready{Node: e.Node, Namespace: e.Namespace, Version: e.Version, Config: e.Config, At: e.At})
	default:
		r.onStart(simoperator.Start{Node: e.Node, Namespace: e.Namespace, Version: e.Version, Hash: e.Hash, Pod: e.Pod, At: e.At})
	}
}
