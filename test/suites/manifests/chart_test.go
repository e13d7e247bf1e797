package manifests

import (
	"encoding/json"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/lint/support"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/medallia/express-sequencer/internal/sequencer"

	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/test/framework/helmchart"
)

// chart renders charts/express-sequencer into the namespace config/default
// installs into, and returns its objects by kind and name.
func chart(t *testing.T, overrides map[string]any) map[string]map[string][]byte {
	t.Helper()
	out, err := helmchart.Render(filepath.Join(controlplane.Root(), "charts", "express-sequencer"), "express-sequencer-system", overrides)
	require.NoError(t, err)
	objs := map[string]map[string][]byte{}
	for _, doc := range strings.Split(out, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		data, err := utilyaml.ToJSON([]byte(doc))
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		require.NoError(t, u.UnmarshalJSON(data), doc)
		if objs[u.GetKind()] == nil {
			objs[u.GetKind()] = map[string][]byte{}
		}
		objs[u.GetKind()][u.GetName()] = data
	}
	return objs
}

// The Helm chart and the kustomize install must agree where a difference
// would change behaviour: webhook rules and settings, RBAC, the binary's
// arguments, and the certificate the webhooks are served with.
func TestTheHelmChartAgreesWithKustomize(t *testing.T) {
	// config/default is the cert-manager install; the chart is one value away.
	k, h := install(t), chart(t, map[string]any{"certMode": "cert-manager"})

	for _, kind := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"} {
		require.Len(t, h[kind], 1, kind)
		for name := range k[kind] {
			var kw, hw struct {
				Metadata struct{ Annotations map[string]string }
				Webhooks []admissionregistrationv1.ValidatingWebhook
			}
			require.NoError(t, json.Unmarshal(k[kind][name], &kw))
			require.Contains(t, h[kind], name, "the chart names the %s as kustomize does", kind)
			require.NoError(t, json.Unmarshal(h[kind][name], &hw))
			assert.Equal(t, kw.Webhooks, hw.Webhooks, "%s webhooks: rules, paths, policies, service", kind)
			assert.Equal(t, kw.Metadata.Annotations["cert-manager.io/inject-ca-from"], hw.Metadata.Annotations["cert-manager.io/inject-ca-from"])
		}
	}

	kr := decode[rbacv1.ClusterRole](t, k, "ClusterRole", "express-sequencer-manager-role")
	hr := decode[rbacv1.ClusterRole](t, h, "ClusterRole", "express-sequencer-manager-role")
	assert.Equal(t, kr.Rules, hr.Rules, "the same permissions, no more")

	kd := decode[appsv1.Deployment](t, k, "Deployment", "express-sequencer-controller-manager")
	hd := decode[appsv1.Deployment](t, h, "Deployment", "express-sequencer-controller-manager")
	assert.ElementsMatch(t, kd.Spec.Template.Spec.Containers[0].Args, hd.Spec.Template.Spec.Containers[0].Args)
	assert.Equal(t, *kd.Spec.Replicas, *hd.Spec.Replicas)
	assert.Equal(t, kd.Spec.Template.Spec.Containers[0].SecurityContext, hd.Spec.Template.Spec.Containers[0].SecurityContext)
	assert.Equal(t, kd.Spec.Template.Spec.Volumes, hd.Spec.Template.Spec.Volumes)

	kc := decode[cmapi.Certificate](t, k, "Certificate", "express-sequencer-serving-cert")
	hc := decode[cmapi.Certificate](t, h, "Certificate", "express-sequencer-serving-cert")
	assert.Equal(t, kc.Spec.DNSNames, hc.Spec.DNSNames)
	assert.Equal(t, kc.Spec.SecretName, hc.Spec.SecretName)
	assert.Equal(t, kc.Spec.IssuerRef, hc.Spec.IssuerRef)
}

func TestTheHelmChartValues(t *testing.T) {
	h := chart(t, map[string]any{
		"replicas": 3, "certMode": "self-signed", "logLevel": "debug",
		"image":  map[string]any{"repository": "registry.example/express-sequencer", "tag": "v1"},
		"orders": map[string]any{"provisioningOrder": []any{"be"}, "upgradeOrder": []any{"fe1", "be"}},
	})
	d := decode[appsv1.Deployment](t, h, "Deployment", "express-sequencer-controller-manager")
	c := d.Spec.Template.Spec.Containers[0]
	assert.Equal(t, int32(3), *d.Spec.Replicas)
	assert.Equal(t, "registry.example/express-sequencer:v1", c.Image)
	assert.Contains(t, c.Args, "--cert-mode=self-signed")
	assert.Contains(t, c.Args, "--log-level=debug")
	assert.Contains(t, c.Args, "--order-config=/etc/express-sequencer/orders.yaml")
	assert.Contains(t, c.Args, "--cert-hosts=express-sequencer-webhook-service.express-sequencer-system.svc")
	assert.Contains(t, c.Args, "--ca-secret=express-sequencer-system/express-sequencer-webhook-ca", "replicas share one CA")
	assert.Empty(t, h["Certificate"], "no cert-manager objects in self-signed mode")
	for _, w := range h["MutatingWebhookConfiguration"] {
		assert.NotContains(t, string(w), "inject-ca-from")
	}
	require.Contains(t, h["ConfigMap"], "express-sequencer-orders")
	assert.Contains(t, string(h["ConfigMap"]["express-sequencer-orders"]), "upgradeOrder")
}

// The binary reads its orders once, at start: a helm upgrade that changes
// them changes the pod template, so the pods roll and take them; one that
// does not leaves the template alone.
func TestAChangeOfTheOrdersRollsThePods(t *testing.T) {
	template := func(orders map[string]any) map[string]string {
		values := map[string]any{"podAnnotations": map[string]any{"example.com/team": "express"}}
		if orders != nil {
			values["orders"] = orders
		}
		d := decode[appsv1.Deployment](t, chart(t, values), "Deployment", "express-sequencer-controller-manager")
		assert.Equal(t, "express", d.Spec.Template.Annotations["example.com/team"], "podAnnotations are kept")
		return d.Spec.Template.Annotations
	}
	one := map[string]any{"provisioningOrder": []any{"be"}, "upgradeOrder": []any{"fe1", "be"}}
	other := map[string]any{"provisioningOrder": []any{"be"}, "upgradeOrder": []any{"fe2", "be"}}
	assert.NotEmpty(t, template(one)["checksum/orders"])
	assert.NotEqual(t, template(one), template(other))
	assert.NotContains(t, template(nil), "checksum/orders", "no orders, no checksum")
}

// namespaceSelector limits every webhook — nodes and pods — to the
// namespaces it selects, to bring tenants in one at a time.
func TestANamespaceSelectorLimitsEveryWebhook(t *testing.T) {
	sel := map[string]any{"matchLabels": map[string]any{"express.medallia.com/sequenced": "true"}}
	objs := chart(t, map[string]any{"namespaceSelector": sel})
	count := 0
	for kind, byName := range objs {
		if kind != "MutatingWebhookConfiguration" && kind != "ValidatingWebhookConfiguration" {
			continue
		}
		for name, data := range byName {
			var cfg struct {
				Webhooks []struct {
					Name              string                `json:"name"`
					NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
				} `json:"webhooks"`
			}
			require.NoError(t, json.Unmarshal(data, &cfg))
			for _, w := range cfg.Webhooks {
				count++
				require.NotNil(t, w.NamespaceSelector, "%s %s", name, w.Name)
				assert.Equal(t, map[string]string{"express.medallia.com/sequenced": "true"}, w.NamespaceSelector.MatchLabels, "%s %s", name, w.Name)
			}
		}
	}
	all := 0
	for kind, byName := range chart(t, nil) {
		for _, data := range byName {
			assert.NotContains(t, string(data), "namespaceSelector", "none by default")
			if strings.HasSuffix(kind, "WebhookConfiguration") {
				all += strings.Count(string(data), `"admissionReviewVersions"`)
			}
		}
	}
	assert.Equal(t, all, count, "every webhook, pods included")
	assert.GreaterOrEqual(t, count, 3)
}

// What a Helm user expects of a chart: the recommended labels on every
// object, self-signed certificates unless asked (nothing else needed in the
// cluster), the image tag from appVersion, the usual scheduling and
// pod-metadata values, a schema that names a bad value.
func TestTheChartFollowsHelmConventions(t *testing.T) {
	h := chart(t, nil)
	for kind, byName := range h {
		for name, data := range byName {
			u := &unstructured.Unstructured{}
			require.NoError(t, u.UnmarshalJSON(data))
			l := u.GetLabels()
			for _, key := range []string{"helm.sh/chart", "app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/version", "app.kubernetes.io/managed-by"} {
				assert.NotEmpty(t, l[key], "%s %s has label %s", kind, name, key)
			}
		}
	}
	d := decode[appsv1.Deployment](t, h, "Deployment", "express-sequencer-controller-manager")
	assert.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--cert-mode=self-signed", "self-signed by default")
	assert.Empty(t, h["Certificate"])
	assert.Equal(t, "express-sequencer:0.1.0", d.Spec.Template.Spec.Containers[0].Image, "the tag defaults to appVersion")

	h = chart(t, map[string]any{
		"nodeSelector":      map[string]any{"pool": "system"},
		"tolerations":       []any{map[string]any{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}},
		"affinity":          map[string]any{"nodeAffinity": map[string]any{}},
		"priorityClassName": "system-cluster-critical",
		"podAnnotations":    map[string]any{"example.com/scrape": "true"},
		"podLabels":         map[string]any{"team": "express"},
		"imagePullSecrets":  []any{map[string]any{"name": "registry"}},
		"serviceAccount":    map[string]any{"annotations": map[string]any{"iam.example.com/role": "sequencer"}},
	})
	d = decode[appsv1.Deployment](t, h, "Deployment", "express-sequencer-controller-manager")
	pod := d.Spec.Template
	assert.Equal(t, map[string]string{"pool": "system"}, pod.Spec.NodeSelector)
	assert.Len(t, pod.Spec.Tolerations, 1)
	assert.NotNil(t, pod.Spec.Affinity)
	assert.Equal(t, "system-cluster-critical", pod.Spec.PriorityClassName)
	assert.Equal(t, "true", pod.Annotations["example.com/scrape"])
	assert.Equal(t, "express", pod.Labels["team"])
	assert.Equal(t, "express-sequencer", pod.Labels["app.kubernetes.io/name"], "the selector's label stays")
	assert.Equal(t, []corev1.LocalObjectReference{{Name: "registry"}}, pod.Spec.ImagePullSecrets)
	sa := decode[corev1.ServiceAccount](t, h, "ServiceAccount", "express-sequencer-controller-manager")
	assert.Equal(t, "sequencer", sa.Annotations["iam.example.com/role"])

	for _, c := range []struct {
		values map[string]any
		want   string
	}{
		{map[string]any{"certMode": "foo"}, "at '/certMode': value must be one of 'self-signed', 'cert-manager'"},
		{map[string]any{"settleTime": "ten seconds"}, "at '/settleTime'"},
		{map[string]any{"replicas": 0}, "at '/replicas'"},
	} {
		_, err := helmchart.Render(filepath.Join(controlplane.Root(), "charts", "express-sequencer"), "express-sequencer-system", c.values)
		require.Error(t, err, "%v", c.values)
		assert.Contains(t, err.Error(), c.want)
	}
	// 0 turns the settle time off, as the flag's help says: "0", or the
	// number --set settleTime=0 gives.
	for _, zero := range []any{"0", 0} {
		d = decode[appsv1.Deployment](t, chart(t, map[string]any{"settleTime": zero}), "Deployment", "express-sequencer-controller-manager")
		assert.Contains(t, d.Spec.Template.Spec.Containers[0].Args, "--settle-time=0", "%#v", zero)
	}
}

// Two replicas (the default) keep one up through a drain; one replica gets
// no PodDisruptionBudget, whose minAvailable 1 would refuse every drain.
func TestTheDisruptionBudgetNeverBlocksADrain(t *testing.T) {
	assert.Contains(t, chart(t, nil)["PodDisruptionBudget"], "express-sequencer-controller-manager")
	assert.Empty(t, chart(t, map[string]any{"replicas": 1})["PodDisruptionBudget"])
}

// The aggregated roles let on-call pause, resume and release nodes with
// their usual edit role, and read them with view.
func TestTheChartAggregatesIntoEditAndView(t *testing.T) {
	h := chart(t, nil)
	edit := decode[rbacv1.ClusterRole](t, h, "ClusterRole", "express-sequencer-edit")
	assert.Equal(t, "true", edit.Labels["rbac.authorization.k8s.io/aggregate-to-edit"])
	assert.Contains(t, edit.Rules[0].Verbs, "patch")
	view := decode[rbacv1.ClusterRole](t, h, "ClusterRole", "express-sequencer-view")
	assert.Equal(t, "true", view.Labels["rbac.authorization.k8s.io/aggregate-to-view"])
	assert.NotContains(t, view.Rules[0].Verbs, "patch")
	k := install(t)
	assert.Equal(t, edit.Rules, decode[rbacv1.ClusterRole](t, k, "ClusterRole", "express-sequencer-edit").Rules, "kustomize ships the same")
	assert.Equal(t, view.Rules, decode[rbacv1.ClusterRole](t, k, "ClusterRole", "express-sequencer-view").Rules)
}

// The PrometheusRule (off by default) alerts on metrics the binary exports,
// by their exported names.
func TestThePrometheusRuleAlertsOnExportedMetrics(t *testing.T) {
	assert.Empty(t, chart(t, nil)["PrometheusRule"], "off by default")
	h := chart(t, map[string]any{"prometheusRule": map[string]any{"enabled": true, "labels": map[string]any{"release": "prometheus"}}})
	rule := h["PrometheusRule"]["express-sequencer"]
	require.NotEmpty(t, rule)
	exported := map[string]bool{}
	for _, n := range sequencer.MetricNames() {
		exported[n] = true
	}
	names := regexp.MustCompile(`(express_sequencer_[a-z_]+|controller_runtime_[a-z_]+)`).FindAllString(string(rule), -1)
	require.NotEmpty(t, names)
	for _, n := range names {
		base := strings.TrimSuffix(n, "_bucket")
		assert.True(t, exported[base] || exported[n] || strings.HasPrefix(n, "controller_runtime_webhook"), "%s is a metric the binary exports", n)
	}
	assert.Contains(t, string(rule), `"release":"prometheus"`)
}

// helm lint, with Helm's own lint action: no error, no warning, in both
// certificate modes and with the optional objects on.
func TestTheChartLintsClean(t *testing.T) {
	dir := filepath.Join(controlplane.Root(), "charts", "express-sequencer")
	for _, vals := range []map[string]any{
		nil,
		{"certMode": "cert-manager", "serviceMonitor": map[string]any{"enabled": true}, "prometheusRule": map[string]any{"enabled": true}, "grafanaDashboard": map[string]any{"enabled": true}},
	} {
		result := action.NewLint().Run([]string{dir}, vals)
		assert.Empty(t, result.Errors, "%v", vals)
		for _, m := range result.Messages {
			assert.Less(t, m.Severity, support.WarningSev, "%v: %s", vals, m)
		}
	}
}
