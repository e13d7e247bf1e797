package controlplane

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/testing/simoperator"
)

// StartOperator runs the simulated Express operator in a manager of its own,
// as a separate process would, until the returned stop is called.
func (cp *ControlPlane) StartOperator(op *simoperator.Operator) (stop func(), err error) {
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, fmt.Errorf("creating the simulated operator's manager: %w", err)
	}
	op.Client = mgr.GetClient()
	if err := op.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("the simulated operator's cache did not sync: %w", <-done)
	}
	return func() { cancel(); <-done }, nil
}
