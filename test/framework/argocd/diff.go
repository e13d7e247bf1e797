package argocd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/itchyny/gojq"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/jsonmergepatch"
)

// Ignore is one entry of an Application's spec.ignoreDifferences.
type Ignore struct {
	Group, Kind       string
	JSONPointers      []string
	JQPathExpressions []string
}

// LegacyDiff is Argo CD's default diff of a resource its scheme does not
// know (a custom resource): a three-way diff of the desired manifest, the
// live object and the last-applied-configuration kubectl apply left on it
// (gitops-engine pkg/diff: Diff → ThreeWayDiff, ported). Both sides are
// normalized with the ignores first, as Argo CD does. It returns whether
// Argo CD would show the resource OutOfSync and the JSON paths that differ.
func LegacyDiff(config, live *unstructured.Unstructured, ignores []Ignore) (bool, []string, error) {
	config, live = remarshal(config), remarshal(live)
	for _, u := range []*unstructured.Unstructured{config, live} {
		if err := normalize(u, ignores); err != nil {
			return false, nil, err
		}
	}
	last, ok := live.GetAnnotations()[corev1.LastAppliedConfigAnnotation]
	if !ok {
		return false, nil, fmt.Errorf("%s %s carries no %s: apply it with kubectl apply, as Argo CD does", live.GetKind(), live.GetName(), corev1.LastAppliedConfigAnnotation)
	}
	orig := &unstructured.Unstructured{}
	if err := json.Unmarshal([]byte(last), &orig.Object); err != nil {
		return false, nil, err
	}
	if err := normalize(orig, ignores); err != nil {
		return false, nil, err
	}
	orig, config = withoutNamespace(orig), withoutNamespace(config)
	origBytes, err := json.Marshal(orig.Object)
	if err != nil {
		return false, nil, err
	}
	configBytes, err := json.Marshal(config.Object)
	if err != nil {
		return false, nil, err
	}
	trimmed, err := json.Marshal(removeMapFields(orig.Object, live.Object))
	if err != nil {
		return false, nil, err
	}
	patch, err := jsonmergepatch.CreateThreeWayJSONMergePatch(origBytes, configBytes, trimmed)
	if err != nil {
		return false, nil, err
	}
	liveBytes, err := json.Marshal(live.Object)
	if err != nil {
		return false, nil, err
	}
	predicted, err := jsonpatch.MergePatch(liveBytes, patch)
	if err != nil {
		return false, nil, err
	}
	if bytes.Equal(liveBytes, predicted) {
		return false, nil, nil
	}
	var p, l any
	if err := json.Unmarshal(predicted, &p); err != nil {
		return false, nil, err
	}
	if err := json.Unmarshal(liveBytes, &l); err != nil {
		return false, nil, err
	}
	return true, differences("", p, l), nil
}

// remarshal strips Go types through a JSON round trip, as Argo CD does.
func remarshal(u *unstructured.Unstructured) *unstructured.Unstructured {
	data, err := json.Marshal(u.Object)
	if err != nil {
		panic(err)
	}
	out := &unstructured.Unstructured{}
	if err := json.Unmarshal(data, &out.Object); err != nil {
		panic(err)
	}
	unstructured.RemoveNestedField(out.Object, "metadata", "creationTimestamp")
	return out
}

// withoutNamespace drops the namespace and an empty annotations map.
func withoutNamespace(u *unstructured.Unstructured) *unstructured.Unstructured {
	u = u.DeepCopy()
	if md, ok := u.Object["metadata"].(map[string]any); ok {
		delete(md, "namespace")
		if a, ok := md["annotations"]; ok && (a == nil || reflect.ValueOf(a).Len() == 0) {
			delete(md, "annotations")
		}
	}
	return u
}

// removeMapFields keeps only the fields of live that config has, into
// lists item by item (gitops-engine pkg/utils/json).
func removeMapFields(config, live map[string]any) map[string]any {
	out := map[string]any{}
	for k, c := range config {
		l, ok := live[k]
		if !ok {
			continue
		}
		if l != nil {
			l = removeFields(c, l)
		}
		out[k] = l
	}
	return out
}

func removeFields(config, live any) any {
	switch c := config.(type) {
	case map[string]any:
		if l, ok := live.(map[string]any); ok {
			return removeMapFields(c, l)
		}
	case []any:
		if l, ok := live.([]any); ok {
			out := make([]any, 0, len(l))
			for i, item := range l {
				if i < len(c) && item != nil {
					item = removeFields(c[i], item)
				}
				out = append(out, item)
			}
			return out
		}
	}
	return live
}

// Normalize removes what the ignores name from u in place, as Argo CD's
// ignoreDifferences normalizer does.
func Normalize(u *unstructured.Unstructured, ignores []Ignore) error { return normalize(u, ignores) }

// normalize removes what the ignores name from u, as Argo CD's
// ignoreDifferences normalizer does: JSON pointers as JSON patch remove
// operations (a missing path is no error), jq path expressions as del(…).
func normalize(u *unstructured.Unstructured, ignores []Ignore) error {
	gvk := u.GroupVersionKind()
	for _, ig := range ignores {
		if ig.Group != gvk.Group || ig.Kind != gvk.Kind {
			continue
		}
		for _, p := range ig.JSONPointers {
			data, err := json.Marshal(u.Object)
			if err != nil {
				return err
			}
			patch, err := jsonpatch.DecodePatch([]byte(fmt.Sprintf(`[{"op":"remove","path":%q}]`, p)))
			if err != nil {
				return err
			}
			if out, err := patch.Apply(data); err == nil {
				u.Object = map[string]any{}
				if err := json.Unmarshal(out, &u.Object); err != nil {
					return err
				}
			}
		}
		for _, expr := range ig.JQPathExpressions {
			q, err := gojq.Parse("del(" + expr + ")")
			if err != nil {
				return fmt.Errorf("jq path expression %q: %w", expr, err)
			}
			code, err := gojq.Compile(q)
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			v, ok := code.RunWithContext(ctx, u.Object).Next()
			cancel()
			if !ok {
				continue
			}
			if err, isErr := v.(error); isErr {
				return fmt.Errorf("jq path expression %q: %w", expr, err)
			}
			m, isMap := v.(map[string]any)
			if !isMap {
				return fmt.Errorf("jq path expression %q turned the object into %T", expr, v)
			}
			u.Object = m
		}
	}
	return nil
}

// Differences lists the JSON pointers where two decoded JSON documents
// differ.
func Differences(a, b any) []string { return differences("", a, b) }

func differences(path string, a, b any) []string {
	am, aok := a.(map[string]any)
	bm, bok := b.(map[string]any)
	if aok && bok {
		var keys []string
		for k := range am {
			keys = append(keys, k)
		}
		for k := range bm {
			if _, ok := am[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		var out []string
		for _, k := range keys {
			out = append(out, differences(path+"/"+strings.NewReplacer("~", "~0", "/", "~1").Replace(k), am[k], bm[k])...)
		}
		return out
	}
	if reflect.DeepEqual(a, b) {
		return nil
	}
	return []string{path}
}
