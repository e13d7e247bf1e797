// Package tenantchart renders the tenant chart (charts/express-tenant) with
// Helm's Go SDK, as Helm and Argo CD would, for tests and the demo.
package tenantchart

import (
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/cmd/express-sequencer/app"
	"github.com/medallia/express-sequencer/test/controlplane"
)

// Dir is the chart's directory.
func Dir() string { return filepath.Join(controlplane.Root(), "charts", "express-tenant") }

// Render renders the chart with the chart's values overlaid by the given
// values files and then by overrides, and returns the manifests it renders
// and the nodes decoded from them, in manifest order.
func Render(overrides map[string]any, valuesFiles ...string) (string, []v2alpha1.Node, error) {
	chrt, err := loader.Load(Dir())
	if err != nil {
		return "", nil, fmt.Errorf("loading the tenant chart: %w", err)
	}
	vals := map[string]any{}
	for _, f := range valuesFiles {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return "", nil, err
		}
		vals = chartutil.CoalesceTables(v.AsMap(), vals)
	}
	vals = chartutil.CoalesceTables(overrides, vals)
	renderVals, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{Name: "tenant", Namespace: "default"}, nil)
	if err != nil {
		return "", nil, err
	}
	files, err := engine.Render(chrt, renderVals)
	if err != nil {
		return "", nil, fmt.Errorf("rendering the tenant chart: %w", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	var manifests strings.Builder
	for _, name := range names {
		manifests.WriteString(files[name])
	}
	decoder := serializer.NewCodecFactory(app.Scheme()).UniversalDeserializer()
	var nodes []v2alpha1.Node
	for _, doc := range strings.Split(manifests.String(), "\n---") {
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
	return manifests.String(), nodes, nil
}
