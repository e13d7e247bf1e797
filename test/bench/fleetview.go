package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// FleetViewResult is what kubectl express status -A costs on the settled
// fleet, as medians of fleetViewRounds: its one LIST per kind, and the
// planning of every tenant. Beside
// it, in the same run: the same LISTs decoded whole by controller-runtime's
// client (how the view read before it streamed), and the floor no client
// goes below — kube-apiserver sending the four lists to a reader that
// decodes nothing.
type FleetViewResult struct {
	Tenants, Done      int
	Read, Plan         time.Duration
	WholeRead, Serving time.Duration
}

// runFleetView creates the tenants and, once they are provisioned, times
// the fleet view on them (-fleet-view-only).
func runFleetView(o options, out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	st, stop, err := startStack(ctx, o, out)
	if err != nil {
		return err
	}
	defer stop()
	fmt.Fprintf(out, "Creating %d tenants of %d nodes…\n", o.tenants, o.nodes)
	if err := parallel(ctx, o.workers, o.tenants, func(i int) error { return createTenant(ctx, st.c, i, o.nodes, o.rolloutID) }); err != nil {
		return err
	}
	if err := waitCount(ctx, out, "provisioned", st.rec.ready[phase(v1, "")], int64(o.tenants*o.nodes)); err != nil {
		return err
	}
	// As after an upgrade: once the sequencer's last conditions and Events
	// of the provisioning are written.
	if _, err := settledWrites(ctx, st.metricsURL); err != nil {
		return err
	}
	res, err := measureFleetView(ctx, st.cfg, st.c, o.tenants)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\n%d tenants × %d nodes, provisioned\n", o.tenants, o.nodes)
	reportFleetView(out, res)
	return nil
}

func reportFleetView(out io.Writer, fv FleetViewResult) {
	fmt.Fprintf(out, "  fleet view (kubectl express status -A), medians of %d rounds: %d tenants, %d done, in %s (one LIST per kind %s, planning %s); the same LISTs decoded whole %s; kube-apiserver serving them to a reader that decodes nothing %s\n",
		fleetViewRounds, fv.Tenants, fv.Done, (fv.Read + fv.Plan).Round(time.Millisecond), fv.Read.Round(time.Millisecond), fv.Plan.Round(time.Millisecond), fv.WholeRead.Round(time.Millisecond), fv.Serving.Round(time.Millisecond))
}

// fleetViewRounds is how many times the fleet view is measured; each
// figure is the median of its rounds, the reads taken in turn so that they
// share what else the box is doing.
const fleetViewRounds = 5

// measureFleetView reads the whole fleet as kubectl express status -A does
// and sums up every tenant; every tenant must be done.
func measureFleetView(ctx context.Context, cfg *rest.Config, c client.Reader, want int) (FleetViewResult, error) {
	r, err := sequencer.FleetReader(cfg, c)
	if err != nil {
		return FleetViewResult{}, err
	}
	var serving, whole, read, plan []time.Duration
	var res FleetViewResult
	for round := range fleetViewRounds {
		d, err := timeServing(ctx, cfg)
		if err != nil {
			return res, err
		}
		serving = append(serving, d)
		// The whole decode and the streamed one take turns going first.
		var objects rollout.Objects
		for _, streamed := range []bool{round%2 == 0, round%2 != 0} {
			reader, took := c, &whole
			if streamed {
				reader, took = r, &read
			}
			start := time.Now()
			o, err := sequencer.ReadNamespace(ctx, reader, "")
			if err != nil {
				return res, err
			}
			*took = append(*took, time.Since(start))
			if streamed {
				objects = o
			}
		}
		start := time.Now()
		fleet := rollout.FleetOf(objects, defaults.Builtin(), time.Now(), rollout.DefaultProgressDeadline, rollout.DefaultGrouping)
		plan = append(plan, time.Since(start))
		res.Tenants, res.Done = len(fleet), 0
		for _, t := range fleet {
			if t.State == rollout.Done {
				res.Done++
			}
		}
		if res.Tenants != want || res.Done != want {
			return res, fmt.Errorf("the fleet view of the settled fleet shows %d tenants, %d done; want %d, all done", res.Tenants, res.Done, want)
		}
	}
	res.Serving, res.WholeRead, res.Read, res.Plan = percentile(serving, 50), percentile(whole, 50), percentile(read, 50), percentile(plan, 50)
	return res, nil
}

// timeServing times kube-apiserver serving the fleet view's four LISTs at
// once, in the encodings the view asks for (JSON for the custom resources,
// protobuf for pods and StatefulSets), to a reader that discards them.
func timeServing(ctx context.Context, cfg *rest.Config) (time.Duration, error) {
	proto := rest.CopyConfig(cfg)
	proto.ContentType = runtime.ContentTypeProtobuf
	proto.AcceptContentTypes = runtime.ContentTypeProtobuf
	cs, err := kubernetes.NewForConfig(proto)
	if err != nil {
		return 0, err
	}
	json, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	requests := []*rest.Request{
		json.RESTClient().Get().AbsPath("/apis", v2alpha1.GroupVersion.Group, v2alpha1.GroupVersion.Version, "backends"),
		json.RESTClient().Get().AbsPath("/apis", v2alpha1.GroupVersion.Group, v2alpha1.GroupVersion.Version, "frontends"),
		cs.CoreV1().RESTClient().Get().Resource("pods").Param("labelSelector", v2alpha1.LabelNode),
		cs.AppsV1().RESTClient().Get().Resource("statefulsets"),
	}
	start := time.Now()
	var g errgroup.Group
	for _, req := range requests {
		g.Go(func() error {
			body, err := req.Stream(ctx)
			if err != nil {
				return err
			}
			defer body.Close()
			_, err = io.Copy(io.Discard, body)
			return err
		})
	}
	err = g.Wait()
	return time.Since(start), err
}
