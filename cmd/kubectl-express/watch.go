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
// namespace's Backends, Frontends and Express pods (every namespace's when
// ns is empty) and plans again once a burst of events has settled for
// settle, and every every (holds that end with time alone: a settle time,
// a progress deadline), until ctx ends. A watch the API server closes is
// opened again.
func (e *env) watchPlan(ctx context.Context, ns, last string, settle, every time.Duration, plan func(context.Context) (string, error)) error {
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
					errs <- fmt.Errorf("watching %s: %w", where(ns), err)
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
	return e.redrawOn(ctx, events, errs, last, settle, every, plan)
}

// redrawOn prints the view again each time it changes: once a burst of
// events has settled for settle, and every every (holds that end with time
// alone: a settle time, a progress deadline), until ctx ends or errs
// reports.
func (e *env) redrawOn(ctx context.Context, events <-chan struct{}, errs <-chan error, last string, settle, every time.Duration, view func(context.Context) (string, error)) error {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-errs:
			return err
		case <-events:
			// Let a burst of events settle, so one change prints once.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(settle):
			}
		case <-tick.C:
		}
		text, err := view(ctx)
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

// where names namespace ns in a message: every namespace when empty.
func where(ns string) string {
	if ns == "" {
		return "all namespaces"
	}
	return "namespace " + ns
}
