package main

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// FleetViewResult is what kubectl express status -A costs on the settled
// fleet: its one LIST per kind, and the planning of every tenant.
type FleetViewResult struct {
	Tenants, Done int
	Read, Plan    time.Duration
}

// measureFleetView reads the whole fleet as kubectl express status -A does
// and sums up every tenant; every tenant must be done.
func measureFleetView(ctx context.Context, c client.Reader, want int) (FleetViewResult, error) {
	start := time.Now()
	read, err := sequencer.ReadNamespace(ctx, c, "")
	if err != nil {
		return FleetViewResult{}, err
	}
	res := FleetViewResult{Read: time.Since(start)}
	start = time.Now()
	fleet := rollout.FleetOf(read, defaults.Builtin(), time.Now(), rollout.DefaultProgressDeadline, rollout.DefaultGrouping)
	res.Plan = time.Since(start)
	res.Tenants = len(fleet)
	for _, t := range fleet {
		if t.State == rollout.Done {
			res.Done++
		}
	}
	if res.Tenants != want || res.Done != want {
		return res, fmt.Errorf("the fleet view of the settled fleet shows %d tenants, %d done; want %d, all done", res.Tenants, res.Done, want)
	}
	return res, nil
}
