package controlplane

import (
	"context"
	"fmt"
	"sync"

	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/testing/simoperator"
)

// StartOperator runs the simulated Express operator in a manager of its own,
// as a separate process would, until the returned stop is called.
func (cp *ControlPlane) StartOperator(op *simoperator.Operator) (stop func(), err error) {
	return cp.StartController(func(mgr ctrl.Manager) error {
		op.Client = mgr.GetClient()
		return op.SetupWithManager(mgr)
	})
}

// StartController runs the controllers setup adds to a manager of their
// own, as a separate process would, until the returned stop is called: the
// Express operator's part (expressoperator, or simoperator).
func (cp *ControlPlane) StartController(setup func(ctrl.Manager) error) (stop func(), err error) {
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{
		Scheme:                 scheme.New(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, fmt.Errorf("creating the operator's manager: %w", err)
	}
	if err := setup(mgr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		cancel()
		return nil, fmt.Errorf("the operator's cache did not sync: %w", <-done)
	}
	var once sync.Once
	return func() { once.Do(func() { cancel(); <-done }) }, nil // stopping twice returns at once
}
