package controlplane

import (
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// Fields of the test CRDs that express-sequencer's Go types do not model,
// as the Express operator's real CRDs carry many: nested objects, lists of
// objects, maps, int-or-string, and a subtree the API server keeps whatever
// it holds.
const (
	// UnmodelledField is spec.resources: {requests: {cpu, memory}, replicas}.
	UnmodelledField = "resources"
	// PreservedField is spec.extensions, x-kubernetes-preserve-unknown-fields.
	PreservedField = "extensions"
	// SidecarsField is spec.sidecars: [{name, image, env: [{name, value}], ports: [int]}].
	SidecarsField = "sidecars"
	// NodeSelectorField is spec.nodeSelector: a map of strings.
	NodeSelectorField = "nodeSelector"
	// MaxSurgeField is spec.maxSurge: an int or a string.
	MaxSurgeField = "maxSurge"
	// MaintenanceField is spec.maintenance: {enabled: bool, window: {start, end}}.
	MaintenanceField = "maintenance"
)

// expressOperatorCRDs returns the CRDs of config/crd/bases with the spec
// fields only the Express operator's CRDs have: the webhook must keep them
// byte for byte, and a change to them is a target change.
func expressOperatorCRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	paths, err := filepath.Glob(filepath.Join(Root(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("finding the CRDs in config/crd/bases: %v", err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("reading %s: %w", p, err)
		}
		for i := range crd.Spec.Versions {
			spec := crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"]
			str := apiextensionsv1.JSONSchemaProps{Type: "string"}
			spec.Properties[UnmodelledField] = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"replicas": {Type: "integer"},
				"requests": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"cpu": str, "memory": str}},
			}}
			spec.Properties[PreservedField] = apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: ptr.To(true)}
			env := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"name": str, "value": str}}
			spec.Properties[SidecarsField] = apiextensionsv1.JSONSchemaProps{Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{
				Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"name": str, "image": str,
					"env":   {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &env}},
					"ports": {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "integer"}}},
				}},
			}}
			spec.Properties[NodeSelectorField] = apiextensionsv1.JSONSchemaProps{Type: "object",
				AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Allows: true, Schema: &str}}
			spec.Properties[MaxSurgeField] = apiextensionsv1.JSONSchemaProps{XIntOrString: true, AnyOf: []apiextensionsv1.JSONSchemaProps{{Type: "integer"}, {Type: "string"}}}
			spec.Properties[MaintenanceField] = apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
				"enabled": {Type: "boolean"},
				"window":  {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"start": str, "end": str}},
			}}
			crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}
		out = append(out, crd)
	}
	return out, nil
}
