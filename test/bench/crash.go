package main

import (
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/testing/simoperator"
)

// The crash measurement (-crash N): every pod of every node of N tenants is
// deleted in the same instant and recreated at once, frontends first (the
// worst order), as StatefulSets do after a node failure. The pod webhook
// holds the recreated pods scheduling-gated and the sequencer releases them
// in the provisioning order: be, fe1, fe2, …

// crashWatch counts, per crashed namespace, the nodes Ready again since the
// crash.
type crashWatch struct {
	at        time.Time
	crashed   map[string]bool
	seen      map[string]bool // namespace/node Ready since the crash
	readyAt   map[string]time.Time
	recovered atomic.Int64
}

func (r *recorder) watchCrash(namespaces []string) *crashWatch {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := &crashWatch{at: time.Now(), crashed: map[string]bool{}, seen: map[string]bool{}, readyAt: map[string]time.Time{}}
	for _, ns := range namespaces {
		w.crashed[ns] = true
	}
	r.crash = w
	return w
}

// onReadyAfterCrash is called by onReady with the recorder's lock held.
func (w *crashWatch) onReadyAfterCrash(e simoperator.Ready) {
	key := e.Namespace + "/" + e.Node
	if !w.crashed[e.Namespace] || !e.At.After(w.at) || w.seen[key] {
		return
	}
	w.seen[key] = true
	w.readyAt[key] = e.At
	w.recovered.Add(1)
}

// CrashResult is what the crash measurement found.
type CrashResult struct {
	Tenants    int
	Recovery   time.Duration
	Latencies  []time.Duration // previous node Ready → next node's pods schedulable
	OutOfOrder []string
	// Steps are the mean times of the steps of the sequencer's reconciles
	// that release and of the webhooks that read the tenant, during the
	// recovery.
	Steps map[string]time.Duration
	// PodReads are, with -pod-reads-by-name, the recreated pods' admissions by
	// the read they were answered on.
	PodReads map[string]int
}

func measureCrash(ctx context.Context, out io.Writer, evict func(context.Context, string, ...string) error, rec *recorder, o options) (CrashResult, error) {
	res := CrashResult{Tenants: min(o.crash, o.tenants)}
	var namespaces []string
	for i := 0; i < res.Tenants; i++ {
		namespaces = append(namespaces, namespace(i))
	}
	order := defaults.Builtin().Provisioning.Sequence(keys(o.nodes))
	var want []string
	for _, k := range order {
		want = append(want, defaults.NodeName("t", k))
	}
	worst := slices.Clone(want)
	slices.Reverse(worst)
	rec.mu.Lock()
	mark := map[string]int{}
	for _, ns := range namespaces {
		mark[ns] = len(rec.starts[ns])
	}
	rec.mu.Unlock()
	fmt.Fprintf(out, "Deleting every pod of %d tenants at once…\n", res.Tenants)
	w := rec.watchCrash(namespaces)
	if err := parallel(ctx, o.workers, res.Tenants, func(i int) error { return evict(ctx, namespaces[i], worst...) }); err != nil {
		return res, err
	}
	if err := waitCount(ctx, out, "recovered", &w.recovered, int64(res.Tenants*o.nodes)); err != nil {
		return res, err
	}
	res.Recovery = time.Since(w.at)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	for _, ns := range namespaces {
		starts := rec.starts[ns][mark[ns]:]
		var got []string
		for _, s := range starts {
			got = append(got, s.Node)
		}
		if !slices.Equal(got, want) {
			res.OutOfOrder = append(res.OutOfOrder, fmt.Sprintf("%s: %v", ns, got))
			continue
		}
		for j := 1; j < len(want); j++ {
			res.Latencies = append(res.Latencies, starts[j].At.Sub(w.readyAt[ns+"/"+want[j-1]]))
		}
	}
	return res, nil
}

func reportCrash(out io.Writer, r CrashResult, nodes int) error {
	ms := func(d time.Duration) string { return d.Round(100 * time.Microsecond).String() }
	fmt.Fprintf(out, "\nEvery pod of %d tenants × %d nodes deleted at once and recreated, frontends first\n", r.Tenants, nodes)
	fmt.Fprintf(out, "  recovery:                %s\n", r.Recovery.Round(time.Millisecond))
	fmt.Fprintf(out, "  pod release latency p50: %s  p99 %s  max %s  (%d releases)\n",
		ms(percentile(r.Latencies, 50)), ms(percentile(r.Latencies, 99)), ms(percentile(r.Latencies, 100)), len(r.Latencies))
	fmt.Fprint(out, "  a recreated pod's admission, mean time by step:")
	for _, s := range []string{"pods/scoped_read", "pods/fresh_read", "pods/decide"} {
		fmt.Fprintf(out, " %s %s", s, r.Steps[s].Round(10*time.Microsecond))
	}
	fmt.Fprintln(out)
	for _, k := range slices.Sorted(maps.Keys(r.PodReads)) {
		fmt.Fprintf(out, "    %-60s %d\n", strings.TrimPrefix(k, breakdownPrefix+"(not writes) "), r.PodReads[k])
	}
	if len(r.OutOfOrder) > 0 {
		return fmt.Errorf("%d tenants recovered out of order, e.g. %s", len(r.OutOfOrder), r.OutOfOrder[0])
	}
	fmt.Fprintln(out, "  every tenant recovered in order: be, fe1, fe2, …")
	return nil
}
