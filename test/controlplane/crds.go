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
// as the Express operator's real CRDs carry many: a nested object and a
// subtree the API server keeps whatever it holds.
const (
	// UnmodelledField is spec.resources: {requests: {cpu, memory}, replicas}.
	UnmodelledField = "resources"
	// PreservedField is spec.extensions, x-kubernetes-preserve-unknown-fields.
	PreservedField = "extensions"
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
			crd.Spec.Versions[i].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}
		out = append(out, crd)
	}
	return out, nil
}
