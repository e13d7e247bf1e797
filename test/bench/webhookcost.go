package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// The cost of admission (-admission N): Backend/Frontend creates and Express
// pod creates (dry-run: admitted in full, webhooks included, not stored) at
// a steady rate, with express-sequencer's webhooks registered and with them
// removed, in alternating rounds of the same run.

// creates are the two kinds of create measured.
type creates struct{ nodes, pods []time.Duration }

// measureWebhookCost runs rounds of n/rounds node creates and as many pod
// creates at rate per second, alternately with the webhooks registered and
// without them.
func measureWebhookCost(ctx context.Context, c client.Client, n int, rate float64) (with, without creates, err error) {
	const rounds = 4
	each, next := max(1, n/rounds), 0
	round := func(into *creates) error {
		first := next
		next += each
		nodes, err := paced(ctx, each, rate, func(i int) error { return dryRunNode(ctx, c, first+i) })
		if err != nil {
			return err
		}
		pods, err := paced(ctx, each, rate, func(i int) error { return dryRunPod(ctx, c, first+i) })
		if err != nil {
			return err
		}
		into.nodes, into.pods = append(into.nodes, nodes...), append(into.pods, pods...)
		return nil
	}
	for r := 0; r < rounds; r++ {
		if r%2 == 0 {
			err = round(&with)
		} else {
			err = withoutWebhooks(ctx, c, func() error { return round(&without) })
		}
		if err != nil {
			return with, without, err
		}
	}
	return with, without, nil
}

// paced calls f n times, one call every 1/rate seconds whatever the calls
// take (an open loop, as independent clients do), and returns each call's
// latency.
func paced(ctx context.Context, n int, rate float64, f func(i int) error) ([]time.Duration, error) {
	out := make([]time.Duration, n)
	errs := make([]error, n)
	tick := time.NewTicker(time.Duration(float64(time.Second) / rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-tick.C:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			errs[i] = f(i)
			out[i] = time.Since(start)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// dryRunNode creates, dry-run, one more Frontend of tenant 0: the webhooks
// inject its defaults, stamp its target and check its prerequisites against
// the tenant's 8 nodes.
func dryRunNode(ctx context.Context, c client.Client, i int) error {
	fe := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t-fe%d", 100+i), Namespace: namespace(0)}}
	fe.Spec = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "t"}, ExpressVersion: v2}
	if err := c.Create(ctx, fe, client.DryRunAll); err != nil {
		return fmt.Errorf("creating Frontend %s (dry run): %w", fe.Name, err)
	}
	return nil
}

// dryRunPod creates, dry-run, one more pod of node t-fe1 of tenant 0.
func dryRunPod(ctx context.Context, c client.Client, i int) error {
	p := benchPod(fmt.Sprintf("t-fe1-extra-%d", i), map[string]string{v2alpha1.LabelNode: "t-fe1"})
	if err := c.Create(ctx, p, client.DryRunAll); err != nil {
		return fmt.Errorf("creating pod %s (dry run): %w", p.Name, err)
	}
	return nil
}

// benchPod is a pod of tenant 0's namespace with labels, to create dry-run.
func benchPod(name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace(0), Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "c"}}},
	}
}

// withoutWebhooks removes every webhook configuration, runs f once the API
// server no longer calls them, and puts them back as they were (CA bundle
// included), waiting until it calls them again.
func withoutWebhooks(ctx context.Context, c client.Client, f func() error) error {
	var m admissionregistrationv1.MutatingWebhookConfigurationList
	var v admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := c.List(ctx, &m); err != nil {
		return err
	}
	if err := c.List(ctx, &v); err != nil {
		return err
	}
	var saved []client.Object
	for i := range m.Items {
		saved = append(saved, &m.Items[i])
	}
	for i := range v.Items {
		saved = append(saved, &v.Items[i])
	}
	for _, obj := range saved {
		if err := c.Delete(ctx, obj); err != nil {
			return fmt.Errorf("removing webhook configuration %s: %w", obj.GetName(), err)
		}
	}
	if err := waitFor(ctx, func() bool { return !webhooksCalled(ctx, c) }); err != nil {
		return err
	}
	ferr := f()
	for _, obj := range saved {
		obj.SetResourceVersion("")
		obj.SetUID("")
		obj.SetCreationTimestamp(metav1.Time{})
		obj.SetManagedFields(nil)
		if err := c.Create(ctx, obj); err != nil {
			return fmt.Errorf("restoring webhook configuration %s: %w", obj.GetName(), err)
		}
	}
	if err := waitFor(ctx, func() bool { return webhooksCalled(ctx, c) }); err != nil {
		return err
	}
	return ferr
}

// webhooksCalled reports whether the API server calls the webhooks: the
// mutating node webhook stamps a new node's target hash.
func webhooksCalled(ctx context.Context, c client.Client) bool {
	fe := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "t-probe", Namespace: namespace(0)}}
	fe.Spec = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "t"}, ExpressVersion: v2}
	if err := c.Create(ctx, fe, client.DryRunAll); err != nil {
		return false
	}
	return fe.GetAnnotations()[v2alpha1.AnnotationTargetHash] != ""
}

// reportWebhookCost prints the admission cost: p50 and p99 of each create
// with and without the webhooks, their difference and ratio.
func reportWebhookCost(out io.Writer, with, without creates, rate float64) {
	ms := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
	row := func(what string, a, b []time.Duration) {
		for _, p := range []float64{50, 99} {
			x, y := percentile(a, p), percentile(b, p)
			fmt.Fprintf(out, "  %-34s p%-2.0f with %-8s without %-8s +%-8s ×%.2f\n", what, p, ms(x), ms(y), ms(x-y), float64(x)/float64(max(y, time.Microsecond)))
		}
	}
	fmt.Fprintf(out, "\nAdmission cost at %g creates/s, webhooks registered and removed in alternating rounds (%d creates each way)\n", rate, len(with.nodes))
	row("Frontend create (dry run)", with.nodes, without.nodes)
	row("Express pod create (dry run)", with.pods, without.pods)
}
