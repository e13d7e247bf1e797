package cli

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// The metrics endpoint is HTTPS and asks the API server about every caller:
// no token, 401; a token of an identity without GET /metrics, 403; one
// bound to the shipped metrics-reader ClusterRole, the metrics.
func TestMetricsAreServedOnlyToCallersAllowedToReadThem(t *testing.T) {
	ctx := context.Background()
	port, err := controlplane.FreePort()
	require.NoError(t, err)
	o := harness.ManagerOptions(t.TempDir(), logr.Discard())
	o.Webhooks = false
	o.MetricsAddr = fmt.Sprintf("127.0.0.1:%d", port)
	// Elected as installed (the lease name the no-leader alert selects on).
	o.LeaderElect, o.LeaderElectionNS = true, "default"
	require.Equal(t, "express-sequencer.express.medallia.com", o.LeaderElectionID)
	require.True(t, o.MetricsSecure, "secure by default")
	_, stop, err := harness.StartManager(o)
	require.NoError(t, err)
	defer stop()

	// The ClusterRole as shipped, bound to one ServiceAccount.
	data, err := os.ReadFile(filepath.Join(controlplane.Root(), "config", "rbac", "metrics_reader_role.yaml"))
	require.NoError(t, err)
	role := &rbacv1.ClusterRole{}
	require.NoError(t, yaml.Unmarshal(data, role))
	role.Name = "e2e-metrics-reader"
	require.NoError(t, harness.Client.Create(ctx, role))
	ns := namespace(t)
	cs, err := kubernetes.NewForConfig(harness.Config)
	require.NoError(t, err)
	token := func(name string) string {
		require.NoError(t, harness.Client.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}))
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
		require.NoError(t, err)
		return tr.Status.Token
	}
	reader, stranger := token("prometheus"), token("stranger")
	require.NoError(t, harness.Client.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-metrics-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "prometheus", Namespace: ns}},
	}))

	get := func(bearer string) (int, string) {
		t.Helper()
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the binary's self-signed metrics certificate
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", port), nil)
		require.NoError(t, err)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := c.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	require.Eventually(t, func() bool { code, _ := get(reader); return code == http.StatusOK }, 20*time.Second, 100*time.Millisecond,
		"the reader gets the metrics (RBAC may take a moment)")
	code, body := get(reader)
	assert.Equal(t, http.StatusOK, code)
	assert.True(t, strings.Contains(body, `express_sequencer_release_latency_seconds_bucket{le="60"}`), "the sequencer's metrics, latency buckets up to a minute")
	require.Eventually(t, func() bool {
		_, body := get(reader)
		return strings.Contains(body, `leader_election_master_status{name="express-sequencer.express.medallia.com"} 1`)
	}, 30*time.Second, 200*time.Millisecond, "the series the no-leader alert reads, at 1 once this replica leads")
	// The leader's order auditor lists and watches pods through the config
	// app.New gives it: its requests are counted as the auditor's, apart
	// from the manager cache's watch of pods (other).
	require.Eventually(t, func() bool {
		_, body := get(reader)
		return strings.Contains(body, `express_sequencer_api_requests_total{caller="auditor",resource="pods",verb="list"}`) &&
			strings.Contains(body, `express_sequencer_api_requests_total{caller="other",resource="pods",verb="watch"}`)
	}, 30*time.Second, 200*time.Millisecond, "the auditor's requests counted as its own")
	code, body = get(stranger)
	assert.Equal(t, http.StatusForbidden, code, "authenticated, not authorized")
	assert.False(t, strings.Contains(body, "express_sequencer"))
	code, body = get("")
	assert.Equal(t, http.StatusUnauthorized, code, "no token")
	assert.False(t, strings.Contains(body, "express_sequencer"))
	code, body = get("not-a-token")
	assert.NotEqual(t, http.StatusOK, code, "a token the API server does not know")
	assert.False(t, strings.Contains(body, "express_sequencer"))
}
