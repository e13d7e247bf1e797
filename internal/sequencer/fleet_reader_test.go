package sequencer

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

func TestAStreamedListIsDecodedItemByItem(t *testing.T) {
	for name, c := range map[string]struct {
		body     string
		items    []string
		version  string
		errorHas string
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
			body: `{"metadata":{},"items":[{"metadata":{"name":"acme-fe1"}},{"metadata":{"na`, errorHas: "item 1 of the list",
		},
		"a body cut off after the items is an error": {
			body: `{"metadata":{},"items":[]`, errorHas: "decoding the list",
		},
		"a body that is not an object is an error": {
			body: `[1,2]`, errorHas: `where "{" belongs`,
		},
		"items that are not an array are an error": {
			body: `{"items":{"a":1}}`, errorHas: "where the items belong",
		},
		"an item of the wrong shape is an error": {
			body: `{"items":[{"metadata":"acme-fe1"}]}`, errorHas: "item 0 of the list",
		},
		"a response that is not the list asked for is an error": {
			body: `{"kind":"BackendList","metadata":{},"items":[]}`, errorHas: `the response is a "BackendList", not a FrontendList`,
		},
		"a response without a kind is an error, not an empty list": {
			body: `{}`, errorHas: `the response is a "", not a FrontendList`,
		},
	} {
		t.Run(name, func(t *testing.T) {
			meta := metav1.ListMeta{Continue: "left from before"}
			items := []v2alpha1.Frontend{{ObjectMeta: metav1.ObjectMeta{Name: "left from before"}}}
			err := decodeList(strings.NewReader(c.body), "FrontendList", &meta, &items)
			if c.errorHas != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.errorHas)
				return
			}
			require.NoError(t, err)
			var names []string
			for _, n := range items {
				names = append(names, n.Name)
			}
			assert.Equal(t, c.items, names)
			assert.Equal(t, c.version, meta.ResourceVersion)
			assert.Empty(t, meta.Continue, "nothing is kept from a list read before")
		})
	}
}

// Field names are matched exactly, as client-go decodes objects: a key
// that differs in case from the field is not that field.
func TestAStreamedItemsFieldNamesAreMatchedExactly(t *testing.T) {
	body := `{"kind":"FrontendList","metadata":{},"items":[{"metadata":{"name":"acme-fe1"},"spec":{"Up":false,"RolloutGates":[{"name":"x"}],"clusterConfig":{"clusterName":"acme","TenantID":"9"}}}]}`
	var meta metav1.ListMeta
	var items []v2alpha1.Frontend
	require.NoError(t, decodeList(strings.NewReader(body), "FrontendList", &meta, &items))
	require.Len(t, items, 1)
	spec := items[0].Spec
	assert.Nil(t, spec.Up, "Up is not up")
	assert.Empty(t, spec.RolloutGates, "RolloutGates is not rolloutGates")
	assert.Empty(t, spec.ClusterConfig.TenantID, "TenantID is not tenantID")
	assert.Equal(t, "acme", spec.ClusterConfig.ClusterName)
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
func TestAStreamedListIsReadAgainWhenItsConnectionBreaks(t *testing.T) {
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
			for reader, newReader := range map[string]func(*rest.Config, client.Reader) (client.Reader, error){"streamed": FleetReader, "whole": FreshReader} {
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

func TestAWholeListIsDecodedOnce(t *testing.T) {
	for name, c := range map[string]struct {
		body     string
		items    []string
		version  string
		errorHas string
	}{
		"a list's items and metadata are read": {
			body:  `{"apiVersion":"express.medallia.com/v2alpha1","kind":"FrontendList","metadata":{"resourceVersion":"42"},"items":[{"metadata":{"name":"acme-fe1"}},{"metadata":{"name":"acme-fe2"}}]}`,
			items: []string{"acme-fe1", "acme-fe2"}, version: "42",
		},
		"an empty list has no items": {
			body: `{"kind":"FrontendList","metadata":{"resourceVersion":"9"},"items":[]}`, version: "9",
		},
		"a body cut off is an error": {
			body: `{"kind":"FrontendList","metadata":{},"items":[{"metadata":{"na`, errorHas: "decoding the list",
		},
		"an item of the wrong shape is an error": {
			body: `{"kind":"FrontendList","items":[{"metadata":"acme-fe1"}]}`, errorHas: "decoding the list",
		},
		"a response that is not the list asked for is an error": {
			body: `{"kind":"BackendList","metadata":{},"items":[]}`, errorHas: `the response is a "BackendList", not a FrontendList`,
		},
		"a response without a kind is an error, not an empty list": {
			body: `{}`, errorHas: `the response is a "", not a FrontendList`,
		},
		"a failure answered as a success is the API server's error": {
			body: `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"frontends is forbidden"}`, errorHas: "frontends is forbidden",
		},
	} {
		t.Run(name, func(t *testing.T) {
			list := v2alpha1.FrontendList{}
			err := decodeWhole([]byte(c.body), "FrontendList", &list, &list.TypeMeta)
			if c.errorHas != "" {
				assert.ErrorContains(t, err, c.errorHas)
				if strings.Contains(c.body, `"Forbidden"`) {
					assert.True(t, apierrors.IsForbidden(err), "typed as the API server's error: %v", err)
				}
				return
			}
			require.NoError(t, err)
			var names []string
			for _, n := range list.Items {
				names = append(names, n.Name)
			}
			assert.Equal(t, c.items, names)
			assert.Equal(t, c.version, list.ResourceVersion)
			assert.Empty(t, list.Kind, "a typed list's kind is left empty, as client-go leaves it")
		})
	}
}

// Field names are matched exactly in a whole list too.
func TestAWholeListsFieldNamesAreMatchedExactly(t *testing.T) {
	body := `{"kind":"FrontendList","metadata":{},"items":[{"metadata":{"name":"acme-fe1"},"spec":{"Up":false,"clusterConfig":{"clusterName":"acme","TenantID":"9"}}}]}`
	list := v2alpha1.FrontendList{}
	require.NoError(t, decodeWhole([]byte(body), "FrontendList", &list, &list.TypeMeta))
	require.Len(t, list.Items, 1)
	assert.Nil(t, list.Items[0].Spec.Up, "Up is not up")
	assert.Empty(t, list.Items[0].Spec.ClusterConfig.TenantID, "TenantID is not tenantID")
	assert.Equal(t, "acme", list.Items[0].Spec.ClusterConfig.ClusterName)
}
