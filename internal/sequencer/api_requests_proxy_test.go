package sequencer_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/medallia/express-sequencer/internal/sequencer"
)

// A server address with a path — a proxy's, as Rancher's
// /k8s/clusters/ID — prefixes every request client-go sends: each is still
// named by the path after the prefix. The requests go to a transport that
// answers 404 (nothing is behind the proxy here); the paths are client-go's.
func TestARequestBehindAProxyPathIsNamedByThePathAfterIt(t *testing.T) {
	var paths []string
	cfg := &rest.Config{Host: "https://proxy.invalid/k8s/clusters/c-1", Transport: roundTrip(func(req *http.Request) (*http.Response, error) {
		paths = append(paths, req.URL.Path)
		return &http.Response{StatusCode: http.StatusNotFound, Header: http.Header{"Content-Type": {"application/json"}},
			Body: io.NopCloser(strings.NewReader(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}`)), Request: req}, nil
	})}
	cfg.Wrap(sequencer.CountRequests)
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	const caller = "behind-a-proxy"
	ctx := sequencer.WithCaller(context.Background(), caller)
	kinds := [][2]string{{"get", "pods"}, {"list", "statefulsets"}, {"get", "namespaces"}, {"update", "namespaces/status"}, {"get", "nodes"}}
	before := map[[2]string]float64{}
	for _, k := range kinds {
		before[k] = sequencer.APIRequests(caller, k[0], k[1])
	}

	_, err = cs.CoreV1().Pods("acme").Get(ctx, "acme-be-0", metav1.GetOptions{})
	require.Error(t, err)
	_, err = cs.AppsV1().StatefulSets("acme").List(ctx, metav1.ListOptions{})
	require.Error(t, err)
	_, err = cs.CoreV1().Namespaces().Get(ctx, "acme", metav1.GetOptions{})
	require.Error(t, err)
	_, err = cs.CoreV1().Namespaces().UpdateStatus(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme"}}, metav1.UpdateOptions{})
	require.Error(t, err)
	_, err = cs.CoreV1().Nodes().Get(ctx, "machine-1", metav1.GetOptions{})
	require.Error(t, err)

	require.Len(t, paths, len(kinds))
	for _, p := range paths {
		assert.True(t, strings.HasPrefix(p, "/k8s/clusters/c-1/api"), "client-go sent %s behind the prefix", p)
	}
	for _, k := range kinds {
		assert.Equal(t, before[k]+1, sequencer.APIRequests(caller, k[0], k[1]), "%s %s", k[0], k[1])
	}
}
