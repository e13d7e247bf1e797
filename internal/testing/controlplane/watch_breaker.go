package controlplane

import (
	"io"
	"net/http"
	"strings"
	"sync"
)

// WatchBreaker breaks, on demand, the watches a client makes of some
// resources, as a kube-apiserver restart does to a watch of a revision its
// new watch cache no longer has: Break ends each open watch and holds every
// list and watch of those resources until Mend, which answers the first
// watch of each with a 410 Gone in the stream — client-go's reflector then
// lists again without calling its watch error handler.
type WatchBreaker struct {
	// Resources are path segments (e.g. "/frontends") whose requests break.
	Resources []string

	mu      sync.Mutex
	broken  bool
	mended  chan struct{}
	gone    map[string]bool // resources whose next watch is told 410 Gone
	watches []io.Closer
}

// Wrap is the client's transport wrapper (rest.Config.Wrap).
func (b *WatchBreaker) Wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		resource := b.resourceOf(req.URL.Path)
		if resource == "" {
			return rt.RoundTrip(req)
		}
		b.mu.Lock()
		mended := b.mended
		b.mu.Unlock()
		if mended != nil {
			select {
			case <-mended:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
		watch := req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1"
		b.mu.Lock()
		if watch && b.gone[resource] {
			delete(b.gone, resource)
			b.mu.Unlock()
			return goneWatch(req), nil
		}
		b.mu.Unlock()
		resp, err := rt.RoundTrip(req)
		if err == nil && watch {
			b.mu.Lock()
			b.watches = append(b.watches, resp.Body)
			b.mu.Unlock()
		}
		return resp, err
	})
}

// Break ends every open watch of the resources and holds their lists and
// watches until Mend.
func (b *WatchBreaker) Break() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.mended = make(chan struct{})
	b.gone = map[string]bool{}
	for _, r := range b.Resources {
		b.gone[r] = true
	}
	for _, w := range b.watches {
		_ = w.Close()
	}
	b.watches = nil
}

// Mend lets the held requests go; the first watch of each resource is told
// 410 Gone.
func (b *WatchBreaker) Mend() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.mended != nil {
		close(b.mended)
		b.mended = nil
	}
}

func (b *WatchBreaker) resourceOf(path string) string {
	for _, r := range b.Resources {
		if strings.HasSuffix(path, r) {
			return r
		}
	}
	return ""
}

// goneWatch is a watch answered with a 410 Gone in its stream, as a
// kube-apiserver answers a watch of a revision its watch cache has not.
func goneWatch(req *http.Request) *http.Response {
	body := `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version","reason":"Expired","code":410}}` + "\n"
	return &http.Response{StatusCode: http.StatusOK, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": []string{"application/json"}}, Body: io.NopCloser(strings.NewReader(body)),
		ContentLength: -1, Request: req}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
