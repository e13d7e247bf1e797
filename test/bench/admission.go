package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// The admission measurements (-admission N), made in the same run as the
// upgrade so that both sides of each comparison share one machine state:
//
//   - pod creation latency through the pod webhook (pods labelled
//     express.medallia.com/node) and without it (unlabelled pods), N each,
//     interleaved;
//   - the time from the last apply of a change applied node by node to the
//     first release, for N tenants carrying rollout-id and N without it (the
//     settle time).

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[int(float64(len(s)-1)*p/100)]
}

// measurePodAdmission creates n pods of node t-fe1 of tenant 0 (sent to the
// pod webhook) and n ordinary pods, alternating, and returns the latencies
// of both kinds of create.
func measurePodAdmission(ctx context.Context, c client.Client, n int) (withHook, without []time.Duration, err error) {
	for i := 0; i < n; i++ {
		for _, labelled := range []bool{true, false} {
			p := benchPod(fmt.Sprintf("plain-%d", i), map[string]string{"app": "bench"})
			if labelled {
				p = benchPod(fmt.Sprintf("express-%d", i), map[string]string{v2alpha1.LabelNode: "t-fe1"})
			}
			start := time.Now()
			if err := c.Create(ctx, p, client.DryRunAll); err != nil {
				return nil, nil, fmt.Errorf("creating pod %s: %w", p.Name, err)
			}
			if labelled {
				withHook = append(withHook, time.Since(start))
			} else {
				without = append(without, time.Since(start))
			}
		}
	}
	return withHook, without, nil
}

// measureLanding applies a version change to n tenants node by node (be
// first, as Helm does), with or without rollout-id, and returns for each the
// time from its last apply to its first release.
func measureLanding(ctx context.Context, c client.Client, rec *recorder, first, n, nodes int, withID bool) ([]time.Duration, error) {
	var out []time.Duration
	for i := first; i < first+n; i++ {
		if err := createTenant(ctx, c, i, nodes, withID); err != nil {
			return nil, err
		}
		ns := namespace(i)
		if err := waitFor(ctx, func() bool { return rec.readyCount(ns, phase(v1, "")) == nodes }); err != nil {
			return nil, fmt.Errorf("provisioning %s: %w", ns, err)
		}
		rec.mu.Lock()
		before := map[string]int{}
		for node, times := range rec.released {
			before[node] = len(times)
		}
		rec.mu.Unlock()
		if err := setAll(ctx, c, i, nodes, func(n v2alpha1.Node) {
			n.NodeSpec().ExpressVersion = v2
			if withID {
				annotate(n, v2alpha1.AnnotationRolloutID, "r2")
			}
		}); err != nil {
			return nil, err
		}
		last := time.Now()
		var firstRelease time.Time
		if err := waitFor(ctx, func() bool {
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for _, k := range keys(nodes) {
				node := ns + "/" + defaults.NodeName("t", k)
				if times := rec.released[node]; len(times) > before[node] {
					firstRelease = times[before[node]]
					return true
				}
			}
			return false
		}); err != nil {
			return nil, fmt.Errorf("waiting for the first release in %s: %w", ns, err)
		}
		out = append(out, firstRelease.Sub(last))
	}
	return out, nil
}

func setAll(ctx context.Context, c client.Client, i, nodes int, edit func(v2alpha1.Node)) error {
	for _, k := range keys(nodes) {
		n := v2alpha1.NewNode(k.Kind())
		key := client.ObjectKey{Namespace: namespace(i), Name: defaults.NodeName("t", k)}
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, key, n); err != nil {
				return err
			}
			edit(n)
			return c.Update(ctx, n)
		}); err != nil {
			return fmt.Errorf("updating %s: %w", key, err)
		}
	}
	return nil
}

func annotate(n v2alpha1.Node, key, value string) {
	ann := n.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[key] = value
	n.SetAnnotations(ann)
}

func waitFor(ctx context.Context, f func() bool) error {
	for !f() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

// reportAdmission runs both measurements and prints them.
func reportAdmission(ctx context.Context, out io.Writer, c client.Client, rec *recorder, o options) error {
	withHook, without, err := measurePodAdmission(ctx, c, o.admission)
	if err != nil {
		return err
	}
	withID, err := measureLanding(ctx, c, rec, o.tenants, o.admission, o.nodes, true)
	if err != nil {
		return err
	}
	noID, err := measureLanding(ctx, c, rec, o.tenants+o.admission, o.admission, o.nodes, false)
	if err != nil {
		return err
	}
	cost, costWithout, err := measureWebhookCost(ctx, c, 4*o.admission, 100)
	if err != nil {
		return err
	}
	reportWebhookCost(out, cost, costWithout, 100)
	ms := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
	fmt.Fprintf(out, "\nAdmission, same run (%d samples each)\n", o.admission)
	fmt.Fprintf(out, "  pod create, through the pod webhook:   p50 %s  p99 %s\n", ms(percentile(withHook, 50)), ms(percentile(withHook, 99)))
	fmt.Fprintf(out, "  pod create, not sent to it:            p50 %s  p99 %s\n", ms(percentile(without, 50)), ms(percentile(without, 99)))
	fmt.Fprintf(out, "  last apply → first release, rollout-id: p50 %s  p99 %s\n", ms(percentile(withID, 50)), ms(percentile(withID, 99)))
	fmt.Fprintf(out, "  last apply → first release, settle %s:  p50 %s  p99 %s\n", o.settle, ms(percentile(noID, 50)), ms(percentile(noID, 99)))
	return nil
}
