package sequencer

import (
	"context"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// The parts of express-sequencer whose requests to the API server
// express_sequencer_api_requests_total tells apart (its caller label).
const (
	// CallerSequencer: the sequencer's reconciles — their fresh reads and
	// their writes.
	CallerSequencer = "sequencer"
	// CallerReleaseGuard: the release guard's reads, as a release is written.
	CallerReleaseGuard = "release-guard"
	// CallerPods: the pod webhook's reads, as an Express pod is created.
	CallerPods = "pods"
	// CallerAuditor: the order auditor's watches, lists and reads.
	CallerAuditor = "auditor"
	// CallerOther: everything else — the caches' lists and watches, leader
	// election, Events, the node webhooks' reads, the auditor's condition
	// writes, certificate rotation, the metrics endpoint's reviews.
	CallerOther = "other"
)

var apiRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "express_sequencer_api_requests_total",
	Help: "Requests express-sequencer sent the API server, by caller (sequencer: the reconciles' reads and writes; release-guard and pods: the webhooks' fresh reads of the tenant; auditor: its watches, lists and reads; other: the rest — the caches' lists and watches, leader election, Events, the node webhooks' reads, the auditor's condition writes, certificate rotation, the metrics endpoint's reviews), verb (get, list, watch, create, update, patch, apply, delete, deletecollection) and resource (with its subresource: frontends/status; discovery for a path of no resource). What each part costs kube-apiserver, reads included, beside express_sequencer_api_writes_total's writes.",
}, []string{"caller", "verb", "resource"})

type callerKey struct{}

// WithCaller returns ctx whose requests to the API server are counted as
// caller's (express_sequencer_api_requests_total).
func WithCaller(ctx context.Context, caller string) context.Context {
	return context.WithValue(ctx, callerKey{}, caller)
}

// CountRequests wraps a connection to the API server so that each request
// is counted by its caller (WithCaller on its context, CallerOther
// without), verb and resource. It goes in a rest.Config's Wrap.
func CountRequests(rt http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		caller, _ := req.Context().Value(callerKey{}).(string)
		if caller == "" {
			caller = CallerOther
		}
		verb, resource := requestKind(req)
		apiRequests.WithLabelValues(caller, verb, resource).Inc()
		return rt.RoundTrip(req)
	})
}

// CountAs wraps a connection to the API server so that its requests of no
// caller are caller's: the order auditor's, whose informers make requests
// on contexts of their own. It goes in a rest.Config's Wrap after
// CountRequests (outside it).
func CountAs(caller string) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if _, ok := req.Context().Value(callerKey{}).(string); !ok {
				req = req.WithContext(WithCaller(req.Context(), caller))
			}
			return rt.RoundTrip(req)
		})
	}
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// requestKind names a request to the API server by verb and resource, as
// kube-apiserver's own request info does for the paths a client sends:
// /api/v1[/namespaces/NS]/RESOURCE[/NAME[/SUB]] and
// /apis/GROUP/VERSION[/namespaces/NS]/RESOURCE[/NAME[/SUB]], after
// whatever prefix the server's address has (a proxy's
// /k8s/clusters/ID). A namespace read by name is a get of namespaces. Any
// other path (discovery, /version) is resource "discovery".
func requestKind(req *http.Request) (verb, resource string) {
	parts := strings.Split(strings.Trim(req.URL.Path, "/"), "/")
	for i, p := range parts {
		if p == "api" || p == "apis" {
			parts = parts[i:]
			break
		}
	}
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		parts = parts[3:]
	default:
		parts = nil
	}
	if len(parts) > 2 && parts[0] == "namespaces" && parts[2] != "status" && parts[2] != "finalize" {
		parts = parts[2:] // namespaces/NS/RESOURCE…, but a namespace's own subresources
	}
	name := ""
	switch len(parts) {
	case 0:
		return strings.ToLower(req.Method), "discovery"
	case 1:
		resource = parts[0]
	case 2:
		resource, name = parts[0], parts[1]
	default:
		resource, name = parts[0]+"/"+parts[2], parts[1]
	}
	switch req.Method {
	case http.MethodGet:
		switch {
		case req.URL.Query().Get("watch") == "true" || req.URL.Query().Get("watch") == "1":
			return "watch", resource
		case name == "":
			return "list", resource
		}
		return "get", resource
	case http.MethodPost:
		return "create", resource
	case http.MethodPut:
		return "update", resource
	case http.MethodPatch:
		if strings.HasPrefix(req.Header.Get("Content-Type"), "application/apply-patch") {
			return "apply", resource
		}
		return "patch", resource
	case http.MethodDelete:
		if name == "" {
			return "deletecollection", resource
		}
		return "delete", resource
	}
	return strings.ToLower(req.Method), resource
}
