package controlplane

import (
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/utils/ptr"

	"github.com/medallia/express-sequencer/internal/certs"
)

// ServeWebhook serves h over TLS, with a certificate of a CA of its own,
// until the test ends, and returns how a webhook registration reaches it at
// path: a webhook of the test's own (another party's, or a replica set up
// otherwise) beside express-sequencer's.
func ServeWebhook(t testing.TB, h http.Handler, path string) admissionregistrationv1.WebhookClientConfig {
	t.Helper()
	now := time.Now()
	ca, err := certs.NewCA(now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := certs.NewServingCert(ca, []string{"127.0.0.1"}, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(serving.CertPEM, serving.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return admissionregistrationv1.WebhookClientConfig{URL: ptr.To(srv.URL + path), CABundle: ca.CertPEM}
}
