// Package helmchart renders a chart with Helm's Go SDK, as `helm template`
// does, for the chart tests and the demo.
package helmchart

import (
	"fmt"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
)

// Render renders the chart in dir for a release in namespace, with the
// chart's values overlaid by the values files and then by overrides. It
// returns the rendered templates, in file order, as one multi-document YAML
// stream (the chart's crds/ are not included).
func Render(dir, namespace string, overrides map[string]any, valuesFiles ...string) (string, error) {
	chrt, err := loader.Load(dir)
	if err != nil {
		return "", fmt.Errorf("loading chart %s: %w", dir, err)
	}
	vals := map[string]any{}
	for _, f := range valuesFiles {
		v, err := chartutil.ReadValuesFile(f)
		if err != nil {
			return "", err
		}
		vals = chartutil.CoalesceTables(v.AsMap(), vals)
	}
	vals = chartutil.CoalesceTables(overrides, vals)
	renderVals, err := chartutil.ToRenderValues(chrt, vals, chartutil.ReleaseOptions{Name: chrt.Name(), Namespace: namespace}, nil)
	if err != nil {
		return "", err
	}
	files, err := engine.Render(chrt, renderVals)
	if err != nil {
		return "", fmt.Errorf("rendering chart %s: %w", dir, err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue // printed after an install, not a manifest (helm template leaves it out too)
		}
		names = append(names, name)
	}
	sort.Strings(names)
	var out strings.Builder
	for _, name := range names {
		if strings.TrimSpace(files[name]) != "" {
			out.WriteString("\n---\n" + files[name])
		}
	}
	return out.String(), nil
}
