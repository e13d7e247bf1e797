package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/scheme"
)

// watchPlan prints the plan again each time it changes: it watches the
// namespace's Backends, Frontends and Express pods (no polling) and plans
// again after each burst of events, until ctx ends. A watch the API server
// closes is opened again.
func (e *env) watchPlan(ctx context.Context, ns, last string, plan func(context.Context) (string, error)) error {
	cfg, err := e.flags.ToRESTConfig()
	if err != nil {
		return err
	}
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	lists := []client.ObjectList{&v2alpha1.BackendList{}, &v2alpha1.FrontendList{}, nil}
	events := make(chan struct{}, 1)
	errs := make(chan error, len(lists))
	for _, list := range lists {
		go func() {
			for ctx.Err() == nil {
				var w watch.Interface
				var err error
				if list == nil {
					w, err = wc.Watch(ctx, podList(), client.InNamespace(ns), client.HasLabels{v2alpha1.LabelNode})
				} else {
					w, err = wc.Watch(ctx, list, client.InNamespace(ns))
				}
				if err != nil {
					errs <- fmt.Errorf("watching namespace %s: %w", ns, err)
					return
				}
				for range w.ResultChan() {
					select {
					case events <- struct{}{}:
					default:
					}
				}
				w.Stop()
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			return err
		case <-events:
		}
		// Let a burst of events settle, so one change prints once.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
		text, err := plan(ctx)
		if err != nil {
			return err
		}
		if text != last {
			fmt.Fprintf(e.out, "\n--- %s\n%s", time.Now().Format(time.TimeOnly), text)
			last = text
		}
	}
}

func podList() client.ObjectList { return &corev1.PodList{} }
