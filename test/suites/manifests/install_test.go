package manifests

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

const releaseNS = "express-sequencer-system"

// helmConfig is Helm's action configuration for the control plane, as the
// helm CLI builds it from a kubeconfig.
func helmConfig(t *testing.T, cp *controlplane.ControlPlane) *action.Configuration {
	t.Helper()
	kubeconfig, err := cp.KubeconfigFile(t.TempDir())
	require.NoError(t, err)
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig = &kubeconfig
	ns := releaseNS
	flags.Namespace = &ns
	cfg := new(action.Configuration)
	require.NoError(t, cfg.Init(flags, releaseNS, "secret", func(format string, v ...any) { t.Logf(format, v...) }))
	return cfg
}

// pointAtPort sends the chart's webhook configurations to the replica on
// 127.0.0.1:port, as the chart's Service would send them to its pods,
// keeping the CA bundle the binary injected; port 0 puts the Service the
// chart rendered back (before Helm patches the configurations again).
func pointAtPort(t *testing.T, cp *controlplane.ControlPlane, port int) {
	t.Helper()
	ctx := context.Background()
	url := func(c *admissionregistrationv1.WebhookClientConfig) {
		path := ""
		switch {
		case c.Service != nil && c.Service.Path != nil:
			path = *c.Service.Path
		case c.URL != nil:
			path = strings.SplitN(strings.TrimPrefix(*c.URL, "https://"), "/", 2)[1]
			path = "/" + path
		}
		if port == 0 {
			c.URL = nil
			c.Service = &admissionregistrationv1.ServiceReference{Namespace: releaseNS, Name: "express-sequencer-webhook-service", Path: &path}
			return
		}
		u := fmt.Sprintf("https://127.0.0.1:%d%s", port, path)
		c.Service, c.URL = nil, &u
	}
	require.Eventually(t, func() bool {
		var m admissionregistrationv1.MutatingWebhookConfigurationList
		var v admissionregistrationv1.ValidatingWebhookConfigurationList
		if cp.Client.List(ctx, &m) != nil || cp.Client.List(ctx, &v) != nil {
			return false
		}
		for i := range m.Items {
			for j := range m.Items[i].Webhooks {
				url(&m.Items[i].Webhooks[j].ClientConfig)
			}
			if cp.Client.Update(ctx, &m.Items[i]) != nil {
				return false
			}
		}
		for i := range v.Items {
			for j := range v.Items[i].Webhooks {
				url(&v.Items[i].Webhooks[j].ClientConfig)
			}
			if cp.Client.Update(ctx, &v.Items[i]) != nil {
				return false
			}
		}
		return true
	}, 10*time.Second, 100*time.Millisecond)
}

// The chart installed and upgraded with Helm's own install and upgrade
// actions into a real API server, and express-sequencer started with the
// arguments the chart rendered for its Deployment (through the binary's own
// flag parsing; only addresses and the cert directory are local): it injects
// its CA into the chart's webhook configurations and serves admission, before
// and after the upgrade.
func TestTheChartInstallsUpgradesAndItsArgumentsServeAdmission(t *testing.T) {
	cp, err := controlplane.Start()
	require.NoError(t, err)
	defer func() { require.NoError(t, cp.Stop()) }()
	ctx := context.Background()
	// The control plane comes with the generated configurations; the chart owns them here.
	require.NoError(t, cp.Client.DeleteAllOf(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{}))
	require.NoError(t, cp.Client.DeleteAllOf(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{}))

	chrt, err := loader.Load(filepath.Join(controlplane.Root(), "charts", "express-sequencer"))
	require.NoError(t, err)
	cfg := helmConfig(t, cp)
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace, install.CreateNamespace = "express-sequencer", releaseNS, true
	install.SkipCRDs = true // the Express operator's CRDs are there already
	rel, err := install.Run(chrt, map[string]any{})
	require.NoError(t, err)
	assert.Contains(t, rel.Info.Notes, "kubectl express plan", "NOTES.txt says how to see a tenant's plan")

	args := deploymentArgs(t, rel.Manifest)
	port, err := controlplane.FreePort()
	require.NoError(t, err)
	o := app.DefaultOptions()
	_, err = app.ParseFlags(append(args,
		"--webhook-host=127.0.0.1", fmt.Sprintf("--webhook-port=%d", port), "--cert-dir="+t.TempDir(), "--cert-hosts=127.0.0.1",
		"--metrics-bind-address=0", "--health-probe-bind-address=0", "--leader-election-namespace="+releaseNS), &o, nil)
	require.NoError(t, err, "the rendered arguments parse: %v", args)
	o.Log = logr.Discard()
	pointAtPort(t, cp, port)
	_, stop, err := cp.StartManager(o) // returns once the API server reaches its webhooks
	require.NoError(t, err, "the chart's configurations reach the binary and trust the CA it injected")
	defer stop()
	be := &v2alpha1.Backend{ObjectMeta: metav1.ObjectMeta{Name: "acme-be", Namespace: "default"},
		Spec: v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "acme"}, ExpressVersion: "express-e689.151"}}
	require.NoError(t, cp.Client.Create(ctx, be))
	assert.True(t, v2alpha1.IsGated(be), "admitted through the chart's webhooks: gated")
	assert.NotNil(t, be.Spec.DeploymentDependencies, "and given the default prerequisites")

	pointAtPort(t, cp, 0)
	upgrade := action.NewUpgrade(cfg)
	upgrade.Namespace = releaseNS
	rel, err = upgrade.Run("express-sequencer", chrt, map[string]any{"replicas": 3, "settleTime": "5s"})
	require.NoError(t, err)
	assert.Equal(t, 2, rel.Version)
	d := &appsv1.Deployment{}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKey{Namespace: releaseNS, Name: "express-sequencer-controller-manager"}, d))
	assert.Equal(t, int32(3), *d.Spec.Replicas)
	assert.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--settle-time=5s")
	pointAtPort(t, cp, port) // the upgrade puts the Service back
	require.NoError(t, cp.WaitForWebhooks(ctx, 20*time.Second), "admission still served after the upgrade, the CA bundle kept")
	fe := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Namespace: "default"},
		Spec: v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "acme"}, ExpressVersion: "express-e689.151"}}
	require.NoError(t, cp.Client.Create(ctx, fe))
	assert.True(t, v2alpha1.IsGated(fe))
}

// deploymentArgs returns the manager container's arguments from a rendered
// release manifest.
func deploymentArgs(t *testing.T, manifest string) []string {
	t.Helper()
	for _, doc := range strings.Split(manifest, "\n---") {
		if !strings.Contains(doc, "kind: Deployment") {
			continue
		}
		d := &appsv1.Deployment{}
		require.NoError(t, utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(doc), 4096).Decode(d))
		for _, c := range d.Spec.Template.Spec.Containers {
			if c.Name == "manager" {
				return c.Args
			}
		}
	}
	t.Fatal("the release has no manager container")
	return nil
}
