// Package certmanager exercises express-sequencer's cert-manager mode as far
// as this machine allows: cert-manager's controller cannot be built here, so
// its CRDs (from its Go module) validate the install's objects in a real API
// server, and the two things cert-manager does for express-sequencer — a
// kubelet-mounted Secret with the serving certificate, renewed in place, and
// cainjector's CA bundle — are done the way they do them.
package certmanager

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/certs"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/webhook"
	"github.com/medallia/express-sequencer/test/framework/helmchart"
)

// certManagerCRDs is the deploy/crds directory of the cert-manager module
// this project builds against.
func certManagerCRDs(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/cert-manager/cert-manager").Output()
	require.NoError(t, err, "the cert-manager module is a dependency: go mod download")
	dir := filepath.Join(strings.TrimSpace(string(out)), "deploy", "crds")
	require.DirExists(t, dir)
	return dir
}

// startWithCertManagerCRDs starts a control plane with cert-manager's CRDs
// installed; its Client knows cert-manager's Go types.
func startWithCertManagerCRDs(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	cp, err := controlplane.Start()
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, cp.Stop()) })
	_, err = envtest.InstallCRDs(cp.Config, envtest.CRDInstallOptions{Paths: []string{certManagerCRDs(t)}, ErrorIfPathMissing: true})
	require.NoError(t, err)
	scheme := scheme.New()
	require.NoError(t, cmapi.AddToScheme(scheme))
	cp.Client, err = client.New(cp.Config, client.Options{Scheme: scheme})
	require.NoError(t, err)
	return cp
}

// The Issuer and Certificate of config/default and of the chart's
// cert-manager mode are accepted by cert-manager's own schemas in a real API
// server — which refuses a broken one.
func TestTheCertManagerObjectsAreValidAgainstCertManagersCRDs(t *testing.T) {
	cp := startWithCertManagerCRDs(t)
	ctx := context.Background()

	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(controlplane.Root(), "config", "default"))
	require.NoError(t, err)
	chart, err := helmchart.Render(filepath.Join(controlplane.Root(), "charts", "express-sequencer"), "es-chart", map[string]any{"certMode": "cert-manager"})
	require.NoError(t, err)
	var objs []*unstructured.Unstructured
	for _, r := range res.Resources() {
		if r.GetApiVersion() == cmapi.SchemeGroupVersion.String() {
			m, err := r.Map()
			require.NoError(t, err)
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	for _, doc := range strings.Split(chart, "\n---") {
		u := &unstructured.Unstructured{}
		if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096).Decode(&u.Object); err != nil || u.GetAPIVersion() != cmapi.SchemeGroupVersion.String() {
			continue
		}
		objs = append(objs, u)
	}
	kinds := map[string]int{}
	for _, u := range objs {
		require.NoError(t, client.IgnoreAlreadyExists(cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: u.GetNamespace()}})))
		require.NoError(t, cp.Client.Create(ctx, u), "%s %s/%s against cert-manager's CRD", u.GetKind(), u.GetNamespace(), u.GetName())
		kinds[u.GetKind()]++
	}
	assert.Equal(t, map[string]int{"Issuer": 2, "Certificate": 2}, kinds, "both installs' objects")

	broken := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": cmapi.SchemeGroupVersion.String(), "kind": "Certificate",
		"metadata": map[string]any{"name": "broken", "namespace": "es-chart"},
		"spec":     map[string]any{"dnsNames": []any{"x"}, "issuerRef": map[string]any{"name": "express-sequencer-selfsigned-issuer"}},
	}}
	err = cp.Client.Create(ctx, broken)
	require.Error(t, err, "cert-manager's schema refuses a Certificate without secretName")
	assert.Contains(t, err.Error(), "secretName")
}

// mountedSecret is a Secret volume the way kubelet keeps one: each file a
// symlink to ..data/<file>, ..data a symlink to a timestamped directory, and
// an update written to a new directory and swapped in by renaming a new
// ..data link over the old one, atomically.
type mountedSecret struct {
	dir string
	n   int
}

func (m *mountedSecret) write(t *testing.T, data map[string][]byte) {
	t.Helper()
	m.n++
	ts := fmt.Sprintf("..2026_11_23_12_00_%02d.%d", m.n, m.n)
	require.NoError(t, os.Mkdir(filepath.Join(m.dir, ts), 0o755))
	for name, b := range data {
		require.NoError(t, os.WriteFile(filepath.Join(m.dir, ts, name), b, 0o644))
	}
	tmp := filepath.Join(m.dir, "..data_tmp")
	require.NoError(t, os.Symlink(ts, tmp))
	require.NoError(t, os.Rename(tmp, filepath.Join(m.dir, "..data")))
	for name := range data {
		link := filepath.Join(m.dir, name)
		if _, err := os.Lstat(link); os.IsNotExist(err) {
			require.NoError(t, os.Symlink(filepath.Join("..data", name), link))
		}
	}
}

// issue writes the serving certificate into the Secret, as cert-manager
// does for the Certificate (tls.crt, tls.key, ca.crt, its annotations).
func issue(t *testing.T, c client.Client, ca, leaf certs.KeyPair) map[string][]byte {
	t.Helper()
	ctx := context.Background()
	data := map[string][]byte{corev1.TLSCertKey: leaf.CertPEM, corev1.TLSPrivateKeyKey: leaf.KeyPEM, cmmeta.TLSCAKey: ca.CertPEM}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "express-sequencer-webhook-server-cert", Namespace: "express-sequencer-system"}}
	_, err := controllerutil.CreateOrUpdate(ctx, c, s, func() error {
		s.Type = corev1.SecretTypeTLS
		s.Annotations = map[string]string{cmapi.CertificateNameKey: "express-sequencer-serving-cert", cmapi.IssuerNameAnnotationKey: "express-sequencer-selfsigned-issuer"}
		s.Data = data
		return nil
	})
	require.NoError(t, err)
	return data
}

// injectCA is what cainjector does for a webhook configuration annotated
// cert-manager.io/inject-ca-from: copy ca.crt of the Certificate's Secret
// into every webhook's caBundle.
func injectCA(t *testing.T, c client.Client) {
	t.Helper()
	ctx := context.Background()
	var m admissionregistrationv1.MutatingWebhookConfigurationList
	var v admissionregistrationv1.ValidatingWebhookConfigurationList
	require.NoError(t, c.List(ctx, &m))
	require.NoError(t, c.List(ctx, &v))
	bundle := func(annotations map[string]string) []byte {
		from := annotations[cmapi.WantInjectAnnotation]
		require.NotEmpty(t, from, "the configuration asks cainjector for the CA")
		ns, name, _ := strings.Cut(from, "/")
		cert := &cmapi.Certificate{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cert))
		s := &corev1.Secret{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cert.Spec.SecretName}, s))
		return s.Data[cmmeta.TLSCAKey]
	}
	for i := range m.Items {
		b := bundle(m.Items[i].Annotations)
		for j := range m.Items[i].Webhooks {
			m.Items[i].Webhooks[j].ClientConfig.CABundle = b
		}
		require.NoError(t, c.Update(ctx, &m.Items[i]))
	}
	for i := range v.Items {
		b := bundle(v.Items[i].Annotations)
		for j := range v.Items[i].Webhooks {
			v.Items[i].Webhooks[j].ClientConfig.CABundle = b
		}
		require.NoError(t, c.Update(ctx, &v.Items[i]))
	}
}

func servedSerial(t *testing.T, cp *controlplane.ControlPlane, ca certs.KeyPair) (string, error) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca.CertPEM)
	conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", cp.WebhookPort), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].SerialNumber.String(), nil
}

// express-sequencer in --cert-mode=cert-manager serves the certificate
// cert-manager put in its Secret, trusted through the bundle cainjector
// wrote, and serves a renewed one — swapped in by kubelet — without a
// restart, while the API server keeps reaching the webhooks.
func TestCertManagerModeServesTheMountedCertificateAndItsRenewal(t *testing.T) {
	cp := startWithCertManagerCRDs(t)
	ctx := context.Background()
	require.NoError(t, cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "express-sequencer-system"}}))
	require.NoError(t, cp.Client.Create(ctx, &cmapi.Issuer{
		ObjectMeta: metav1.ObjectMeta{Name: "express-sequencer-selfsigned-issuer", Namespace: "express-sequencer-system"},
		Spec:       cmapi.IssuerSpec{IssuerConfig: cmapi.IssuerConfig{SelfSigned: &cmapi.SelfSignedIssuer{}}},
	}))
	require.NoError(t, cp.Client.Create(ctx, &cmapi.Certificate{
		ObjectMeta: metav1.ObjectMeta{Name: "express-sequencer-serving-cert", Namespace: "express-sequencer-system"},
		Spec: cmapi.CertificateSpec{
			DNSNames: []string{"127.0.0.1"}, IPAddresses: []string{"127.0.0.1"}, SecretName: "express-sequencer-webhook-server-cert",
			IssuerRef: cmmeta.IssuerReference{Kind: "Issuer", Name: "express-sequencer-selfsigned-issuer"},
		},
	}))
	// The configurations carry the annotation config/default gives them.
	for _, obj := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{}, &admissionregistrationv1.ValidatingWebhookConfiguration{}} {
		name := webhook.MutatingConfigurationName
		if _, ok := obj.(*admissionregistrationv1.ValidatingWebhookConfiguration); ok {
			name = webhook.ValidatingConfigurationName
		}
		require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Name: name}, obj))
		obj.SetAnnotations(map[string]string{cmapi.WantInjectAnnotation: "express-sequencer-system/express-sequencer-serving-cert"})
		require.NoError(t, cp.Client.Update(ctx, obj))
	}

	now := time.Now()
	ca, err := certs.NewCA(now, 24*time.Hour)
	require.NoError(t, err)
	first, err := certs.NewServingCert(ca, []string{"127.0.0.1"}, now, time.Hour)
	require.NoError(t, err)
	mount := &mountedSecret{dir: t.TempDir()}
	mount.write(t, issue(t, cp.Client, ca, first))
	injectCA(t, cp.Client)

	o := cp.ManagerOptions(mount.dir, logr.Discard())
	o.CertMode = app.CertModeCertManager
	o.Sequencer = false
	_, stop, err := cp.StartManager(o) // returns once the API server reaches the webhooks
	require.NoError(t, err, "the mounted certificate is served and trusted through cainjector's bundle")
	defer stop()
	firstCert, err := first.Certificate()
	require.NoError(t, err)
	serial, err := servedSerial(t, cp, ca)
	require.NoError(t, err)
	assert.Equal(t, firstCert.SerialNumber.String(), serial)

	renewed, err := certs.NewServingCert(ca, []string{"127.0.0.1"}, time.Now(), time.Hour)
	require.NoError(t, err)
	mount.write(t, issue(t, cp.Client, ca, renewed))
	renewedCert, err := renewed.Certificate()
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		s, err := servedSerial(t, cp, ca)
		return err == nil && s == renewedCert.SerialNumber.String()
	}, 10*time.Second, 100*time.Millisecond, "the renewed certificate is served without a restart")
	assert.NoError(t, cp.WaitForWebhooks(ctx, 10*time.Second), "and the API server keeps reaching the webhooks")
}
