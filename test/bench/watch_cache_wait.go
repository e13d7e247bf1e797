package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// watchCacheReadWait is kube-apiserver's histogram of the time a read
// waited for its watch cache to be as fresh as the revision it asked for:
// a consistent LIST (the revision etcd has now) and a read or watch from a
// revision.
const watchCacheReadWait = "apiserver_watch_cache_read_wait_seconds"

// cacheWait is what kube-apiserver's watch cache made reads of one
// resource wait.
type cacheWait struct {
	// Reads is how many reads asked the cache for a revision.
	Reads uint64
	// Waited is their wait, in all.
	Waited time.Duration
	// Over50ms is how many waited more than 50 ms.
	Over50ms uint64
}

// Mean is the mean wait of a read.
func (w cacheWait) Mean() time.Duration {
	if w.Reads == 0 {
		return 0
	}
	return w.Waited / time.Duration(w.Reads)
}

// apiServerCacheWaits reads kube-apiserver's watchCacheReadWait by
// resource; nil where it has no watch cache (--watch-cache=false).
func apiServerCacheWaits(ctx context.Context, cfg *rest.Config) (map[string]cacheWait, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading kube-apiserver's metrics: %w", err)
	}
	return cacheWaits(bytes.NewReader(raw))
}

// cacheWaits reads watchCacheReadWait by resource from metrics in the
// Prometheus text format.
func cacheWaits(r io.Reader) (map[string]cacheWait, error) {
	families, err := parseMetrics(r)
	if err != nil {
		return nil, err
	}
	f, ok := families[watchCacheReadWait]
	if !ok {
		return nil, nil
	}
	out := map[string]cacheWait{}
	for _, m := range f.GetMetric() {
		h := m.GetHistogram()
		resource := label(m, "resource")
		if g := label(m, "group"); g != "" {
			resource += "." + g
		}
		w := cacheWait{Reads: h.GetSampleCount(), Waited: time.Duration(h.GetSampleSum() * float64(time.Second))}
		w.Over50ms = w.Reads - countAtMost(h, 0.05)
		out[resource] = w
	}
	return out, nil
}

// countAtMost is how many samples of h are at most le, a bucket's bound.
func countAtMost(h *dto.Histogram, le float64) uint64 {
	for _, b := range h.GetBucket() {
		if b.GetUpperBound() == le {
			return b.GetCumulativeCount()
		}
	}
	return 0
}

// since is what the waits of after add to those of before.
func cacheWaitsSince(before, after map[string]cacheWait) map[string]cacheWait {
	if after == nil {
		return nil
	}
	out := map[string]cacheWait{}
	for resource, a := range after {
		b := before[resource]
		if d := (cacheWait{Reads: a.Reads - b.Reads, Waited: a.Waited - b.Waited, Over50ms: a.Over50ms - b.Over50ms}); d.Reads > 0 {
			out[resource] = d
		}
	}
	return out
}

// reportCacheWaits writes what kube-apiserver's watch cache made reads
// wait: in all, and for the resources a tenant is made of.
func reportCacheWaits(out io.Writer, waits map[string]cacheWait) {
	if waits == nil {
		fmt.Fprintln(out, "  kube-apiserver's watch cache: none (--watch-cache=false): no read waited for it")
		return
	}
	var all cacheWait
	var parts []string
	resources := make([]string, 0, len(waits))
	for r := range waits {
		resources = append(resources, r)
	}
	sort.Strings(resources)
	for _, r := range resources {
		w := waits[r]
		all.Reads, all.Waited, all.Over50ms = all.Reads+w.Reads, all.Waited+w.Waited, all.Over50ms+w.Over50ms
		if strings.HasPrefix(r, "frontends.") || strings.HasPrefix(r, "backends.") || r == "pods" || r == "statefulsets.apps" {
			parts = append(parts, fmt.Sprintf("%s %d, mean %s", r, w.Reads, w.Mean().Round(100*time.Microsecond)))
		}
	}
	fmt.Fprintf(out, "  reads that waited for kube-apiserver's watch cache (every client's consistent LISTs and reads from a revision), provisioning and upgrade: %d, mean %s, %d over 50 ms; %s\n",
		all.Reads, all.Mean().Round(100*time.Microsecond), all.Over50ms, strings.Join(parts, "; "))
}
