// Package manifests checks that the install in config/default hangs together:
// cert-manager issues the certificate the webhooks are served with and the
// API server trusts, for the Service the webhook configurations call.
package manifests

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/webhook"
)

// install builds config/default and returns its objects by kind and name.
func install(t *testing.T) map[string]map[string][]byte { return build(t, "default") }

// build builds an install under config/ and returns its objects by kind and
// name.
func build(t *testing.T, dir string) map[string]map[string][]byte {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	res, err := k.Run(filesys.MakeFsOnDisk(), filepath.Join(controlplane.Root(), "config", dir))
	require.NoError(t, err)
	out := map[string]map[string][]byte{}
	for _, r := range res.Resources() {
		data, err := r.MarshalJSON()
		require.NoError(t, err)
		if out[r.GetKind()] == nil {
			out[r.GetKind()] = map[string][]byte{}
		}
		out[r.GetKind()][r.GetName()] = data
	}
	return out
}

func decode[T any](t *testing.T, objs map[string]map[string][]byte, kind, name string) *T {
	t.Helper()
	data, ok := objs[kind][name]
	require.True(t, ok, "config/default has %s %s", kind, name)
	var v T
	require.NoError(t, json.Unmarshal(data, &v))
	return &v
}

// The Express operator owns the CRDs: config/default leaves them out,
// config/standalone adds them (components/crds), and is otherwise the same.
func TestTheCRDsAreAComponentTheDefaultInstallLeavesOut(t *testing.T) {
	def, standalone := install(t), build(t, "standalone")
	assert.Empty(t, def["CustomResourceDefinition"], "config/default installs no CRD")
	require.Len(t, standalone["CustomResourceDefinition"], 2)
	for _, name := range []string{"backends.express.medallia.com", "frontends.express.medallia.com"} {
		assert.Contains(t, standalone["CustomResourceDefinition"], name, "not renamed by the install's namePrefix")
	}
	delete(standalone, "CustomResourceDefinition")
	assert.Equal(t, def, standalone, "otherwise the same objects")
}

func TestTheCertManagerInstallHangsTogether(t *testing.T) {
	objs := install(t)
	const ns = "express-sequencer-system"
	mutating := decode[admissionregistrationv1.MutatingWebhookConfiguration](t, objs, "MutatingWebhookConfiguration", webhook.MutatingConfigurationName)
	validating := decode[admissionregistrationv1.ValidatingWebhookConfiguration](t, objs, "ValidatingWebhookConfiguration", webhook.ValidatingConfigurationName)
	service := decode[corev1.Service](t, objs, "Service", "express-sequencer-webhook-service")
	deploy := decode[appsv1.Deployment](t, objs, "Deployment", "express-sequencer-controller-manager")

	injectFrom := mutating.Annotations["cert-manager.io/inject-ca-from"]
	assert.Equal(t, injectFrom, validating.Annotations["cert-manager.io/inject-ca-from"])
	certNS, certName, _ := strings.Cut(injectFrom, "/")
	cert := decode[cmapi.Certificate](t, objs, "Certificate", certName)
	assert.Equal(t, certNS, cert.Namespace, "inject-ca-from names the Certificate")
	assert.Contains(t, cert.Spec.DNSNames, service.Name+"."+ns+".svc", "the certificate is for the Service the API server calls")
	issuer := decode[cmapi.Issuer](t, objs, "Issuer", cert.Spec.IssuerRef.Name)
	assert.Equal(t, ns, issuer.Namespace)

	pod := deploy.Spec.Template.Spec
	require.Len(t, pod.Containers, 1)
	args := pod.Containers[0].Args
	assert.Contains(t, args, "--cert-mode="+app.CertModeCertManager)
	certDir := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--cert-dir="); ok {
			certDir = v
		}
	}
	mount := slices.IndexFunc(pod.Containers[0].VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == certDir })
	require.GreaterOrEqual(t, mount, 0, "the cert dir %q is a mounted volume", certDir)
	vol := slices.IndexFunc(pod.Volumes, func(v corev1.Volume) bool { return v.Name == pod.Containers[0].VolumeMounts[mount].Name })
	require.GreaterOrEqual(t, vol, 0)
	assert.Equal(t, cert.Spec.SecretName, pod.Volumes[vol].Secret.SecretName, "the pod mounts the Secret cert-manager writes")
	assert.Equal(t, deploy.Spec.Template.Labels, service.Spec.Selector, "the Service selects the webhook pods")
	assert.GreaterOrEqual(t, *deploy.Spec.Replicas, int32(2), "webhooks with failurePolicy Fail need more than one replica")

	pdb := decode[policyv1.PodDisruptionBudget](t, objs, "PodDisruptionBudget", "express-sequencer-controller-manager")
	assert.Equal(t, deploy.Spec.Template.Labels, pdb.Spec.Selector.MatchLabels, "the budget covers the webhook pods")
	assert.Equal(t, 1, pdb.Spec.MinAvailable.IntValue(), "one replica keeps serving webhooks through drains")
	metricsSvc := decode[corev1.Service](t, objs, "Service", "express-sequencer-metrics")
	assert.Equal(t, deploy.Spec.Template.Labels, metricsSvc.Spec.Selector)

	binding := decode[rbacv1.ClusterRoleBinding](t, objs, "ClusterRoleBinding", "express-sequencer-manager-rolebinding")
	assert.Equal(t, pod.ServiceAccountName, binding.Subjects[0].Name)
	assert.Equal(t, ns, binding.Subjects[0].Namespace)

	type hook struct {
		admissionregistrationv1.WebhookClientConfig
		FailurePolicy *admissionregistrationv1.FailurePolicyType
		SideEffects   *admissionregistrationv1.SideEffectClass
		MatchPolicy   *admissionregistrationv1.MatchPolicyType
		Timeout       *int32
		Rules         []admissionregistrationv1.RuleWithOperations
	}
	var hooks []hook
	for _, w := range mutating.Webhooks {
		if w.Name == "mpod.express.medallia.com" {
			// The pod webhook: sent only the pods of Express nodes.
			require.NotNil(t, w.ObjectSelector, "the pod webhook must never see other pods")
			assert.Equal(t, []metav1.LabelSelectorRequirement{{Key: v2alpha1.LabelNode, Operator: metav1.LabelSelectorOpExists}}, w.ObjectSelector.MatchExpressions)
			assert.Equal(t, admissionregistrationv1.Fail, *w.FailurePolicy, "no Express pod schedules out of order")
			assert.Equal(t, admissionregistrationv1.SideEffectClassNone, *w.SideEffects, "dry-run safe")
			assert.Equal(t, []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, w.Rules[0].Operations)
			assert.Equal(t, []string{"pods"}, w.Rules[0].Resources)
			continue
		}
		hooks = append(hooks, hook{w.ClientConfig, w.FailurePolicy, w.SideEffects, w.MatchPolicy, w.TimeoutSeconds, w.Rules})
	}
	for _, w := range validating.Webhooks {
		if w.Name == "vpod.express.medallia.com" {
			// The pod gate guard: updates of Express pods the sequencer
			// holds only (never scheduled), failing closed so that no
			// release goes unjudged.
			require.NotNil(t, w.ObjectSelector, "the pod gate guard must never see other pods")
			assert.Equal(t, []metav1.LabelSelectorRequirement{{Key: v2alpha1.LabelNode, Operator: metav1.LabelSelectorOpExists}}, w.ObjectSelector.MatchExpressions)
			if assert.Len(t, w.MatchConditions, 1, "only pods that carry the sequencer's gate") {
				assert.Contains(t, w.MatchConditions[0].Expression, "oldObject.spec.schedulingGates.exists(g, g.name == '"+v2alpha1.GateSequencer+"')")
			}
			assert.Equal(t, admissionregistrationv1.Fail, *w.FailurePolicy)
			assert.Equal(t, admissionregistrationv1.SideEffectClassNone, *w.SideEffects)
			assert.Equal(t, []admissionregistrationv1.OperationType{admissionregistrationv1.Update}, w.Rules[0].Operations)
			assert.Equal(t, []string{"pods"}, w.Rules[0].Resources)
			continue
		}
		hooks = append(hooks, hook{w.ClientConfig, w.FailurePolicy, w.SideEffects, w.MatchPolicy, w.TimeoutSeconds, w.Rules})
	}
	require.Len(t, hooks, 4)
	for _, w := range validating.Webhooks {
		if w.Name == "vbackend.express.medallia.com" || w.Name == "vfrontend.express.medallia.com" {
			assert.Contains(t, w.Rules[0].Operations, admissionregistrationv1.Delete, "%s dates deletions", w.Name)
		}
	}
	for _, h := range hooks {
		assert.Equal(t, service.Name, h.Service.Name)
		assert.Equal(t, ns, h.Service.Namespace)
		assert.Equal(t, admissionregistrationv1.Fail, *h.FailurePolicy, "no node slips through ungated")
		// The node validating webhooks are sent deletes too, which they
		// date on the nodes of the tenant that stay: a write a dry run
		// skips. Every other webhook writes nothing.
		deletes := slices.ContainsFunc(h.Rules, func(r admissionregistrationv1.RuleWithOperations) bool {
			return slices.Contains(r.Operations, admissionregistrationv1.Delete)
		})
		if deletes {
			assert.Equal(t, admissionregistrationv1.SideEffectClassNoneOnDryRun, *h.SideEffects, "dry-run safe")
		} else {
			assert.Equal(t, admissionregistrationv1.SideEffectClassNone, *h.SideEffects, "dry-run safe")
		}
		assert.Equal(t, admissionregistrationv1.Equivalent, *h.MatchPolicy)
		assert.LessOrEqual(t, *h.Timeout, int32(10))
		for _, r := range h.Rules {
			assert.Equal(t, []string{"express.medallia.com"}, r.APIGroups)
			assert.Subset(t, []string{"backends", "frontends"}, r.Resources)
		}
	}
}

// The CRD schema docs/express-operator-contract.md asks the Express operator
// to carry is what the generated CRDs hold: every property it shows exists
// there, with the same type, default, list type and keys.
func TestTheContractsCRDSnippetMatchesTheGeneratedCRDs(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(controlplane.Root(), "docs", "express-operator-contract.md"))
	require.NoError(t, err)
	text := string(doc)
	start := strings.Index(text, "## 0. Carry these fields in your CRDs")
	require.GreaterOrEqual(t, start, 0)
	block := text[start:]
	block = block[strings.Index(block, "```yaml\n")+len("```yaml\n"):]
	block = block[:strings.Index(block, "```")]
	var snippet map[string]apiextensionsv1.JSONSchemaProps
	require.NoError(t, yaml.Unmarshal([]byte(block), &snippet))
	require.Contains(t, snippet, "spec")
	require.Contains(t, snippet, "status")
	// The optional printer columns, the section's second YAML block.
	rest := text[start:]
	rest = rest[strings.Index(rest, "```yaml\n")+len("```yaml\n"):]
	rest = rest[strings.Index(rest, "```yaml\n")+len("```yaml\n"):]
	var columns []apiextensionsv1.CustomResourceColumnDefinition
	require.NoError(t, yaml.Unmarshal([]byte(rest[:strings.Index(rest, "```")]), &columns))
	require.NotEmpty(t, columns)
	for _, kind := range []string{"backends", "frontends"} {
		data, err := os.ReadFile(filepath.Join(controlplane.Root(), "config", "crd", "bases", "express.medallia.com_"+kind+".yaml"))
		require.NoError(t, err)
		crd := &apiextensionsv1.CustomResourceDefinition{}
		require.NoError(t, yaml.Unmarshal(data, crd))
		v := crd.Spec.Versions[0]
		require.NotNil(t, v.Subresources)
		assert.NotNil(t, v.Subresources.Status, "%s: the status subresource", kind)
		for name, want := range snippet {
			assertSchemaSubset(t, kind+"."+name, want, v.Schema.OpenAPIV3Schema.Properties[name])
		}
		for _, c := range columns {
			assert.Contains(t, v.AdditionalPrinterColumns, c, "%s: printer column %s as the contract shows it", kind, c.Name)
		}
	}
}

func assertSchemaSubset(t *testing.T, path string, want, got apiextensionsv1.JSONSchemaProps) {
	t.Helper()
	assert.Equal(t, want.Type, got.Type, "%s: type", path)
	assert.Equal(t, want.Enum != nil, got.Enum != nil, "%s: enum", path)
	if want.Default != nil {
		require.NotNil(t, got.Default, "%s: default", path)
		assert.JSONEq(t, string(want.Default.Raw), string(got.Default.Raw), "%s: default", path)
	}
	assert.Equal(t, want.XListType, got.XListType, "%s: x-kubernetes-list-type", path)
	assert.Equal(t, want.XListMapKeys, got.XListMapKeys, "%s: x-kubernetes-list-map-keys", path)
	for _, r := range want.Required {
		assert.Contains(t, got.Required, r, "%s: required", path)
	}
	for name, p := range want.Properties {
		g, ok := got.Properties[name]
		if assert.True(t, ok, "%s.%s exists in the generated CRD", path, name) {
			assertSchemaSubset(t, path+"."+name, p, g)
		}
	}
	if want.Items != nil && want.Items.Schema != nil {
		require.NotNil(t, got.Items, "%s: items", path)
		assertSchemaSubset(t, path+"[]", *want.Items.Schema, *got.Items.Schema)
	}
}
