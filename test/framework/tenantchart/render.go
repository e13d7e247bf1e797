// Package tenantchart renders the tenant chart (charts/express-tenant) with
// Helm's Go SDK, as Helm and Argo CD would, for tests and the demo.
package tenantchart

import (
	"fmt"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/test/framework/helmchart"
)

// Dir is the chart's directory.
func Dir() string { return filepath.Join(controlplane.Root(), "charts", "express-tenant") }

// Render renders the chart with the chart's values overlaid by the given
// values files and then by overrides, and returns the manifests it renders
// and the nodes decoded from them, in manifest order.
func Render(overrides map[string]any, valuesFiles ...string) (string, []v2alpha1.Node, error) {
	return RenderDir(Dir(), overrides, valuesFiles...)
}

// RenderDir is Render of a copy of the chart in dir (a new version of it).
func RenderDir(dir string, overrides map[string]any, valuesFiles ...string) (string, []v2alpha1.Node, error) {
	manifests, err := helmchart.Render(dir, "default", overrides, valuesFiles...)
	if err != nil {
		return "", nil, err
	}
	decoder := serializer.NewCodecFactory(scheme.New()).UniversalDeserializer()
	var nodes []v2alpha1.Node
	for _, doc := range strings.Split(manifests, "\n---") {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		json, err := utilyaml.ToJSON([]byte(doc))
		if err != nil {
			return "", nil, err
		}
		obj, _, err := decoder.Decode(json, nil, nil)
		if err != nil {
			return "", nil, fmt.Errorf("decoding a rendered manifest: %w\n%s", err, doc)
		}
		n, ok := obj.(v2alpha1.Node)
		if !ok {
			return "", nil, fmt.Errorf("the tenant chart rendered a %T", obj)
		}
		nodes = append(nodes, n)
	}
	return manifests, nodes, nil
}
