package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// heapPeak keeps, of the sequencer's heap profiles sampled while it
// watches, the one whose live heap (inuse_space: what the last collection
// kept) was largest: the heap at the run's peak, not at its end.
type heapPeak struct {
	mu    sync.Mutex
	best  []byte
	bytes int64
	at    time.Duration
	err   error
}

// watchHeapPeak samples the heap profile at url every period until ctx
// ends.
func watchHeapPeak(ctx context.Context, url string, period time.Duration) *heapPeak {
	h := &heapPeak{}
	start := time.Now()
	go func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			data, live, err := sampleHeap(ctx, url)
			h.mu.Lock()
			switch {
			case err != nil && ctx.Err() == nil:
				h.err = err
			case err == nil && live > h.bytes:
				h.best, h.bytes, h.at = data, live, time.Since(start).Round(time.Second)
			}
			h.mu.Unlock()
		}
	}()
	return h
}

// sampleHeap reads one heap profile and the live bytes it shows.
func sampleHeap(ctx context.Context, url string) ([]byte, int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("reading the sequencer's heap profile: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, err
	}
	p, err := profile.Parse(bytes.NewReader(data))
	if err != nil {
		return nil, 0, fmt.Errorf("decoding the sequencer's heap profile: %w", err)
	}
	i := -1
	for n, st := range p.SampleType {
		if st.Type == "inuse_space" {
			i = n
		}
	}
	if i < 0 {
		return nil, 0, fmt.Errorf("the sequencer's heap profile has no inuse_space")
	}
	var live int64
	for _, s := range p.Sample {
		live += s.Value[i]
	}
	return data, live, nil
}

// save writes the largest profile to file and says when it was taken.
func (h *heapPeak) save(file string, out io.Writer) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	if h.best == nil {
		return fmt.Errorf("no heap profile was sampled")
	}
	fmt.Fprintf(out, "  heap profile:            %s, at the largest live heap sampled (%d MiB, %s into the upgrade)\n", file, h.bytes>>20, h.at)
	return writeFile(file, bytes.NewReader(h.best))
}
