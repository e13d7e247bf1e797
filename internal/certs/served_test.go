package certs_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/certs"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/webhook"
)

// servedCert dials the webhook server, trusting only the bundle the API
// server was given, and returns the certificate it serves.
func servedCert(t *testing.T, cp *controlplane.ControlPlane) (*x509.Certificate, error) {
	t.Helper()
	cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
	if err := cp.Client.Get(context.Background(), client.ObjectKey{Name: webhook.MutatingConfigurationName}, cfg); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(cfg.Webhooks[0].ClientConfig.CABundle)
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", cp.WebhookPort), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// Certificates this short-lived renew every few seconds, so the test sees
// several rotations of the serving certificate and of the CA on the real
// clock, which the API server checks them against.
func TestRenewedCertificatesAreServedWithoutRestartAndTrustedByTheAPIServer(t *testing.T) {
	cp, err := controlplane.Start()
	require.NoError(t, err)
	defer func() { require.NoError(t, cp.Stop()) }()

	o := cp.ManagerOptions(t.TempDir(), logr.Discard())
	o.CertValidity = 3 * time.Second
	o.CAValidity = 9 * time.Second
	o.CertCheck = 100 * time.Millisecond
	_, stop, err := cp.StartManager(o)
	require.NoError(t, err)
	defer stop()

	first, err := servedCert(t, cp)
	require.NoError(t, err, "the served certificate chains to the injected CA bundle")
	firstIssuer := first.AuthorityKeyId

	require.Eventually(t, func() bool {
		c, err := servedCert(t, cp)
		return err == nil && c.SerialNumber.Cmp(first.SerialNumber) != 0
	}, 20*time.Second, 100*time.Millisecond, "a renewed serving certificate is served without a restart")

	require.Eventually(t, func() bool {
		c, err := servedCert(t, cp)
		return err == nil && string(c.AuthorityKeyId) != string(firstIssuer)
	}, 30*time.Second, 100*time.Millisecond, "after the CA renews, the new CA's certificate is served and trusted through the updated bundle")

	assert.NoError(t, cp.WaitForWebhooks(context.Background(), 10*time.Second), "the API server still reaches the webhooks")
}

// Two replicas in self-signed mode share the CA through a Secret: the one
// bundle in the webhook configurations trusts either of them, so when the
// Service moves from one to the other, admission goes on.
func TestReplicasShareTheCASoEitherCanServe(t *testing.T) {
	cp, err := controlplane.Start()
	require.NoError(t, err)
	defer func() { require.NoError(t, cp.Stop()) }()

	replica := func(dir string, port int) app.Options { return sharedCAReplica(cp, dir, port) }
	dirA, dirB := t.TempDir(), t.TempDir()
	_, stopA, err := cp.StartManager(replica(dirA, cp.WebhookPort))
	require.NoError(t, err)
	portB, err := controlplane.FreePort()
	require.NoError(t, err)
	_, stopB, err := cp.StartManager(replica(dirB, portB))
	require.NoError(t, err)
	defer stopB()

	caA, err := os.ReadFile(filepath.Join(dirA, certs.CAFile))
	require.NoError(t, err)
	caB, err := os.ReadFile(filepath.Join(dirB, certs.CAFile))
	require.NoError(t, err)
	assert.Equal(t, caA, caB, "both replicas use the CA from the Secret")
	keyA, _ := os.ReadFile(filepath.Join(dirA, certs.KeyFile))
	keyB, _ := os.ReadFile(filepath.Join(dirB, certs.KeyFile))
	assert.NotEqual(t, keyA, keyB, "each replica has a serving key of its own")

	assert.NoError(t, cp.WaitForWebhooks(context.Background(), 10*time.Second), "replica A stays trusted once B has started and injected")
	stopA()
	require.NoError(t, cp.PointWebhooksAt(context.Background(), portB))
	assert.NoError(t, cp.WaitForWebhooks(context.Background(), 20*time.Second), "the other replica is trusted through the same bundle")
}

// The webhook configurations re-created without a CA bundle — the emergency
// step of docs/operations.md, Argo CD Replace=true, helm --force — get it
// back within moments, without a restart, while writes keep coming; two
// replicas sharing the CA do not take turns rewriting it.
func TestAWebhookConfigurationRecreatedWithoutItsCABundleGetsItBack(t *testing.T) {
	cp, err := controlplane.Start()
	require.NoError(t, err)
	defer func() { require.NoError(t, cp.Stop()) }()
	replica := func(dir string, port int) app.Options { return sharedCAReplica(cp, dir, port) }
	_, stopA, err := cp.StartManager(replica(t.TempDir(), cp.WebhookPort))
	require.NoError(t, err)
	defer stopA()
	portB, err := controlplane.FreePort()
	require.NoError(t, err)
	_, stopB, err := cp.StartManager(replica(t.TempDir(), portB))
	require.NoError(t, err)
	defer stopB()
	ctx := context.Background()
	require.NoError(t, cp.WaitForWebhooks(ctx, 10*time.Second))

	// Writes keep flowing while the configurations are re-created.
	writes := make(chan error, 1000)
	stopWrites := make(chan struct{})
	go func() {
		for i := 0; ; i++ {
			select {
			case <-stopWrites:
				close(writes)
				return
			case <-time.After(50 * time.Millisecond):
			}
			writes <- cp.WaitForWebhooks(ctx, 100*time.Millisecond)
		}
	}()

	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: webhook.MutatingConfigurationName}, m))
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: webhook.ValidatingConfigurationName}, v))
	for _, obj := range []client.Object{m, v} {
		require.NoError(t, cp.Client.Delete(ctx, obj))
	}
	recreated := time.Now()
	m.ResourceVersion, m.UID = "", ""
	for i := range m.Webhooks {
		m.Webhooks[i].ClientConfig.CABundle = nil
	}
	v.ResourceVersion, v.UID = "", ""
	for i := range v.Webhooks {
		v.Webhooks[i].ClientConfig.CABundle = nil
	}
	require.NoError(t, cp.Client.Create(ctx, m))
	require.NoError(t, cp.Client.Create(ctx, v))

	require.Eventually(t, func() bool { return cp.WaitForWebhooks(ctx, 200*time.Millisecond) == nil }, 5*time.Second, 50*time.Millisecond,
		"writes are admitted again within 5 s, without a restart")
	t.Logf("writes admitted again %s after the configurations were re-created", time.Since(recreated).Round(time.Millisecond))
	close(stopWrites)
	failed := 0
	for err := range writes {
		if err != nil {
			failed++
		}
	}
	t.Logf("%d writes refused meanwhile", failed)

	for _, obj := range []client.Object{m, v} {
		require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	}
	before := m.ResourceVersion + "/" + v.ResourceVersion
	time.Sleep(3 * time.Second)
	for _, obj := range []client.Object{m, v} {
		require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(obj), obj))
	}
	assert.Equal(t, before, m.ResourceVersion+"/"+v.ResourceVersion, "once injected, neither replica writes the configurations again")
}

// sharedCAReplica is a webhooks-only replica in self-signed mode that shares
// its CA with the others through a Secret.
func sharedCAReplica(cp *controlplane.ControlPlane, dir string, port int) app.Options {
	o := cp.ManagerOptions(dir, logr.Discard())
	o.WebhookPort = port
	o.Sequencer = false
	o.CASecret = "default/express-sequencer-webhook-ca"
	return o
}
