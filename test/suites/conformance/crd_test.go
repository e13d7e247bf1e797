package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medallia/express-sequencer/conformance"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
)

// brokenGroup serves copies of the Express CRDs whose rolloutGates list is
// atomic: what an operator's CRDs that left out the contract's schema do.
const brokenGroup = "broken.express.example.com"

// CRDs whose rolloutGates list is not a list map fail the CRD clause,
// which says which field of which CRD.
func TestCRDsWithoutTheContractsSchemaFailTheCRDClause(t *testing.T) {
	ctx := context.Background()
	crdGVK := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
	for _, plural := range []string{"backends", "frontends"} {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(crdGVK)
		require.NoError(t, harness.Client.Get(ctx, client.ObjectKey{Name: plural + ".express.medallia.com"}, crd))
		broken := &unstructured.Unstructured{Object: map[string]any{"apiVersion": crd.GetAPIVersion(), "kind": crd.GetKind(), "spec": crd.Object["spec"]}}
		broken.SetName(plural + "." + brokenGroup)
		require.NoError(t, unstructured.SetNestedField(broken.Object, brokenGroup, "spec", "group"))
		versions, _, _ := unstructured.NestedSlice(broken.Object, "spec", "versions")
		for _, v := range versions {
			unstructured.RemoveNestedField(v.(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "rolloutGates", "x-kubernetes-list-type")
			unstructured.RemoveNestedField(v.(map[string]any), "schema", "openAPIV3Schema", "properties", "spec", "properties", "rolloutGates", "x-kubernetes-list-map-keys")
		}
		require.NoError(t, unstructured.SetNestedSlice(broken.Object, versions, "spec", "versions"))
		require.NoError(t, harness.Client.Create(ctx, broken))
		require.Eventually(t, func() bool {
			if harness.Client.Get(ctx, client.ObjectKeyFromObject(broken), broken) != nil {
				return false
			}
			conds, _, _ := unstructured.NestedSlice(broken.Object, "status", "conditions")
			for _, c := range conds {
				if m := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
					return true
				}
			}
			return false
		}, 30*time.Second, 100*time.Millisecond, "CRD %s established", broken.GetName())
	}
	report, err := conformance.Check(ctx, conformance.Config{
		RESTConfig: harness.Config, Namespace: namespace(t, expressoperator.Breakage{}), Clauses: []string{"crd-fields"},
		GroupVersion: schema.GroupVersion{Group: brokenGroup, Version: "v2alpha1"},
	})
	require.NoError(t, err)
	got, ok := report.Clause("crd-fields")
	require.True(t, ok)
	assert.Equal(t, conformance.Failed, got.Result)
	assert.Contains(t, got.Reason, "spec.rolloutGates is x-kubernetes-list-type (unset), not map")
	assert.Equal(t, conformance.ModeWithoutSequencer, report.Mode, "no webhook stamps the broken group's nodes")
	t.Logf("crd-fields: %s", got.Reason)
}
