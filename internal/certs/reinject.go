package certs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// keepInjected watches the named webhook configurations — only those, by
// name — and injects the CA bundle again the moment one of them is created
// or changed without it: re-created by an emergency procedure, replaced by
// Argo CD or helm --force. Injections are rate limited, doubling the pause
// up to a minute while they keep being undone, so two replicas that
// disagree on the CA cannot write in a loop.
func (r *Rotator) keepInjected(ctx context.Context) {
	if r.Watch == nil {
		return
	}
	type target struct {
		list client.ObjectList
		name string
	}
	var targets []target
	for _, name := range r.MutatingConfigurations {
		targets = append(targets, target{&admissionregistrationv1.MutatingWebhookConfigurationList{}, name})
	}
	for _, name := range r.ValidatingConfigurations {
		targets = append(targets, target{&admissionregistrationv1.ValidatingWebhookConfigurationList{}, name})
	}
	for _, tg := range targets {
		go func() {
			pause := time.Duration(0)
			var last time.Time
			for ctx.Err() == nil {
				w, err := r.Watch.Watch(ctx, tg.list, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", tg.name)})
				if err != nil {
					r.Log.Error(err, "Watching the webhook configuration for its CA bundle; retrying", "configuration", tg.name)
					r.sleep(ctx, time.Second)
					continue
				}
				for ev := range w.ResultChan() {
					if ev.Type != watch.Added && ev.Type != watch.Modified {
						continue
					}
					if ok, trusted := r.checkEvent(ev); !ok || trusted {
						continue
					}
					if since := r.Clock.Since(last); since < pause {
						r.sleep(ctx, pause-since)
					}
					if r.Clock.Since(last) < time.Minute {
						pause = min(max(2*pause, time.Second), time.Minute)
					} else {
						pause = 0
					}
					last = r.Clock.Now()
					// Our CA may be the stale one: another replica may have
					// renewed the shared CA. Catch up first (Ensure injects
					// itself when the CA changed), then look again.
					if _, err := r.Ensure(ctx); err != nil {
						r.Log.Error(err, "Checking the webhook certificates before re-injecting failed")
					}
					if _, trusted := r.checkEvent(ev); trusted {
						continue
					}
					r.Log.Info("Webhook configuration lacks the CA bundle: injecting it again", "configuration", tg.name)
					if err := r.Inject(ctx); err != nil {
						r.Log.Error(err, "Re-injecting the CA bundle failed", "configuration", tg.name)
					}
				}
				w.Stop()
			}
		}()
	}
}

// checkEvent reports whether the event carries a webhook configuration and,
// if so, whether its bundles trust this replica's CA.
func (r *Rotator) checkEvent(ev watch.Event) (ok, trusted bool) {
	var bundles [][]byte
	switch cfg := ev.Object.(type) {
	case *admissionregistrationv1.MutatingWebhookConfiguration:
		for _, w := range cfg.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
	case *admissionregistrationv1.ValidatingWebhookConfiguration:
		for _, w := range cfg.Webhooks {
			bundles = append(bundles, w.ClientConfig.CABundle)
		}
	default:
		return false, false
	}
	return true, r.trusted(bundles)
}

// trusted reports whether every webhook's bundle trusts this replica's
// current CA. A bundle that holds more (a CA another replica renewed to and
// this one has not read yet) is left alone: only a bundle that would make
// the API server refuse this replica's certificate is replaced.
func (r *Rotator) trusted(bundles [][]byte) bool {
	current, err := os.ReadFile(filepath.Join(r.Dir, CAFile))
	if err != nil {
		return true // nothing to inject yet
	}
	for _, b := range bundles {
		if !bytes.Contains(b, bytes.TrimSpace(current)) {
			return false
		}
	}
	return true
}

func (r *Rotator) sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-r.Clock.After(d):
	}
}
