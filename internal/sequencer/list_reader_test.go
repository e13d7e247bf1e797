package sequencer

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// decoders are the two ways a list is decoded: as it streams (the fleet
// view) and whole (the fresh reads). Each fills a list that holds something
// read before.
var decoders = map[string]func(body string) (v2alpha1.FrontendList, error){
	"streamed": func(body string) (v2alpha1.FrontendList, error) {
		list := leftFromBefore()
		err := decodeList(strings.NewReader(body), "FrontendList", &list.ListMeta, &list.Items)
		return list, err
	},
	"whole": func(body string) (v2alpha1.FrontendList, error) {
		list := leftFromBefore()
		err := decodeWhole([]byte(body), "FrontendList", &list, &list.TypeMeta)
		return list, err
	},
}

func leftFromBefore() v2alpha1.FrontendList {
	return v2alpha1.FrontendList{
		ListMeta: metav1.ListMeta{Continue: "left from before"},
		Items:    []v2alpha1.Frontend{{ObjectMeta: metav1.ObjectMeta{Name: "left from before"}}},
	}
}

func TestAListIsDecodedTheSameWayStreamedOrWhole(t *testing.T) {
	for name, c := range map[string]struct {
		body     string
		items    []string
		version  string
		errorHas string
		// streamedErrorHas is what the streamed decoder's error says beyond
		// errorHas: where in the body it broke off.
		streamedErrorHas string
		forbidden        bool
	}{
		"a list's items and metadata are read, other fields skipped": {
			body:  `{"apiVersion":"express.medallia.com/v2alpha1","kind":"FrontendList","metadata":{"resourceVersion":"42","continue":""},"items":[{"metadata":{"name":"acme-fe1"}},{"metadata":{"name":"acme-fe2"},"spec":{"expressVersion":"v1"}}]}`,
			items: []string{"acme-fe1", "acme-fe2"}, version: "42",
		},
		"metadata after the items is read too": {
			body:  `{"items":[{"metadata":{"name":"acme-fe1"}}],"metadata":{"resourceVersion":"7"},"kind":"FrontendList"}`,
			items: []string{"acme-fe1"}, version: "7",
		},
		"an empty list has no items": {
			body: `{"kind":"FrontendList","metadata":{"resourceVersion":"9"},"items":[]}`, version: "9",
		},
		"null items are no items": {
			body: `{"kind":"FrontendList","metadata":{"resourceVersion":"9"},"items":null}`, version: "9",
		},
		"a body cut off in an item is an error naming the item": {
			body: `{"kind":"FrontendList","metadata":{},"items":[{"metadata":{"name":"acme-fe1"}},{"metadata":{"na`, errorHas: "decoding",
			streamedErrorHas: "item 1 of the list",
		},
		"a body cut off after the items is an error": {
			body: `{"kind":"FrontendList","metadata":{},"items":[]`, errorHas: "decoding the list",
		},
		"a body that is not an object is an error": {
			body: `[1,2]`, errorHas: "decoding the list", streamedErrorHas: `where "{" belongs`,
		},
		"items that are not an array are an error": {
			body: `{"kind":"FrontendList","items":{"a":1}}`, errorHas: "decoding the list", streamedErrorHas: "where the items belong",
		},
		"an item of the wrong shape is an error": {
			body: `{"kind":"FrontendList","items":[{"metadata":"acme-fe1"}]}`, errorHas: "cannot unmarshal string", streamedErrorHas: "item 0 of the list",
		},
		"a response that is not the list asked for is an error": {
			body: `{"kind":"BackendList","metadata":{},"items":[]}`, errorHas: `the response is a "BackendList", not a FrontendList`,
		},
		"a response without a kind is an error, not an empty list": {
			body: `{}`, errorHas: `the response is a "", not a FrontendList`,
		},
		"a failure answered as a success is the API server's error": {
			body:     `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"frontends is forbidden"}`,
			errorHas: "frontends is forbidden", forbidden: true,
		},
		"a Status that is no failure is not the list asked for": {
			body: `{"kind":"Status","apiVersion":"v1","status":"Success"}`, errorHas: `the response is a "Status", not a FrontendList`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			for decoder, decode := range decoders {
				list, err := decode(c.body)
				if c.errorHas != "" {
					require.Error(t, err, decoder)
					assert.Contains(t, err.Error(), c.errorHas, decoder)
					if decoder == "streamed" && c.streamedErrorHas != "" {
						assert.Contains(t, err.Error(), c.streamedErrorHas)
					}
					assert.Equal(t, c.forbidden, apierrors.IsForbidden(err), "%s: typed as the API server's error: %v", decoder, err)
					continue
				}
				require.NoError(t, err, decoder)
				var names []string
				for _, n := range list.Items {
					names = append(names, n.Name)
				}
				assert.Equal(t, c.items, names, decoder)
				assert.Equal(t, c.version, list.ResourceVersion, decoder)
				assert.Empty(t, list.Continue, "%s: nothing is kept from a list read before", decoder)
				if decoder == "whole" { // the streamed decoder reads the kind into nothing
					assert.Empty(t, list.Kind, "%s: a typed list's kind is left empty, as client-go leaves it", decoder)
				}
			}
		})
	}
}

// Field names are matched exactly, as client-go decodes objects: a key
// that differs in case from the field is not that field.
func TestAListsFieldNamesAreMatchedExactly(t *testing.T) {
	body := `{"kind":"FrontendList","metadata":{},"items":[{"metadata":{"name":"acme-fe1"},"spec":{"Up":false,"RolloutGates":[{"name":"x"}],"clusterConfig":{"clusterName":"acme","TenantID":"9"}}}]}`
	for decoder, decode := range decoders {
		list, err := decode(body)
		require.NoError(t, err, decoder)
		require.Len(t, list.Items, 1, decoder)
		spec := list.Items[0].Spec
		assert.Nil(t, spec.Up, "%s: Up is not up", decoder)
		assert.Empty(t, spec.RolloutGates, "%s: RolloutGates is not rolloutGates", decoder)
		assert.Empty(t, spec.ClusterConfig.TenantID, "%s: TenantID is not tenantID", decoder)
		assert.Equal(t, "acme", spec.ClusterConfig.ClusterName, decoder)
	}
}

// answer answers with the API server's Status of a failure.
func answer(code int, reason, message string) func(http.ResponseWriter) {
	return func(w http.ResponseWriter) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":%q,"code":%d,"message":%q}`, reason, code, message)
	}
}

// A connection that breaks — before the answer, or halfway through its
// body — is tried again and the list read whole, by either reader; an
// answer that is an error is not tried again.
func TestAListIsReadAgainWhenItsConnectionBreaks(t *testing.T) {
	const list = `{"kind":"FrontendList","apiVersion":"express.medallia.com/v2alpha1","metadata":{"resourceVersion":"5"},"items":[{"metadata":{"name":"acme-fe1"}},{"metadata":{"name":"acme-fe2"}}]}`
	for name, c := range map[string]struct {
		first    func(w http.ResponseWriter)
		requests int
		errorHas string
	}{
		"closed before the answer": {
			first: func(w http.ResponseWriter) {
				conn, _, _ := w.(http.Hijacker).Hijack()
				_ = conn.Close()
			},
			requests: 2,
		},
		"closed halfway through the body": {
			first: func(w http.ResponseWriter) {
				conn, buf, _ := w.(http.Hijacker).Hijack()
				fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(list), list[:len(list)/2])
				_ = buf.Flush()
				_ = conn.Close()
			},
			requests: 2,
		},
		"an error answered": {
			first:    answer(http.StatusForbidden, "Forbidden", "frontends is forbidden"),
			requests: 1, errorHas: "frontends is forbidden",
		},
		"an error answered whose message reads like a broken connection": {
			first:    answer(http.StatusServiceUnavailable, "ServiceUnavailable", "etcd: read tcp: connection reset by peer"),
			requests: 1, errorHas: "connection reset by peer",
		},
	} {
		t.Run(name, func(t *testing.T) {
			var requests atomic.Int32
			server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if requests.Add(1) == 1 {
					c.first(w)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				fmt.Fprint(w, list)
			}))
			defer server.Close()
			for reader, newReader := range readers {
				requests.Store(0)
				r, err := newReader(&rest.Config{Host: server.URL}, nil)
				require.NoError(t, err)
				var fes v2alpha1.FrontendList
				err = r.List(context.Background(), &fes)
				assert.Equal(t, int32(c.requests), requests.Load(), reader)
				if c.errorHas != "" {
					assert.ErrorContains(t, err, c.errorHas, reader)
					continue
				}
				require.NoError(t, err, reader)
				assert.Len(t, fes.Items, 2, reader)
			}
		})
	}
}

// hangUp closes every connection before it answers.
func hangUp(w http.ResponseWriter, _ *http.Request) {
	conn, _, _ := w.(http.Hijacker).Hijack()
	_ = conn.Close()
}

// readers are the two readers, by name.
var readers = map[string]func(*rest.Config, client.Reader) (client.Reader, error){"streamed": FleetReader, "whole": FreshReader}

func TestAListWhoseEveryConnectionBreaksIsReadReadAttemptsTimesAndNoMore(t *testing.T) {
	defer func(d time.Duration) { readAgainAfter = d }(readAgainAfter)
	readAgainAfter = time.Millisecond
	var requests atomic.Int32
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		hangUp(w, r)
	}))
	defer server.Close()
	for reader, newReader := range readers {
		requests.Store(0)
		r, err := newReader(&rest.Config{Host: server.URL}, nil)
		require.NoError(t, err)
		err = r.List(context.Background(), &v2alpha1.FrontendList{})
		assert.True(t, brokenConnection(err), "%s: %v", reader, err)
		assert.Equal(t, int32(readAttempts), requests.Load(), "%s: client-go does not read again on its own", reader)
	}
}

func TestAListReadAgainStopsWhenItsContextEnds(t *testing.T) {
	server := httptest.NewServer(http.HandlerFunc(hangUp))
	defer server.Close()
	for reader, newReader := range readers {
		r, err := newReader(&rest.Config{Host: server.URL}, nil)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		err = r.List(ctx, &v2alpha1.FrontendList{})
		cancel()
		assert.ErrorIs(t, err, context.DeadlineExceeded, reader)
		assert.True(t, brokenConnection(err), "%s: what broke is said too: %v", reader, err)
	}
}
