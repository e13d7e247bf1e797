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

// fleetViewRounds is how many times the fleet view is measured; each
// figure is the median of its rounds, taken in turn so that the three
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
	for range fleetViewRounds {
		d, err := timeServing(ctx, cfg)
		if err != nil {
			return res, err
		}
		serving = append(serving, d)
		start := time.Now()
		if _, err := sequencer.ReadNamespace(ctx, c, ""); err != nil {
			return res, err
		}
		whole = append(whole, time.Since(start))
		start = time.Now()
		objects, err := sequencer.ReadNamespace(ctx, r, "")
		if err != nil {
			return res, err
		}
		read = append(read, time.Since(start))
		start = time.Now()
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
