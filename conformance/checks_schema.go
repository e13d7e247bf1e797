package conformance

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// crdGVK is the kind of a CustomResourceDefinition.
var crdGVK = schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}

// checkCRDFields reads both CRDs' schemas for the fields the contract
// needs, then writes a node with a field unknown to them and reads it back.
func checkCRDFields(ctx context.Context, p *probe) error {
	var problems []string
	for _, plural := range []string{"backends", "frontends"} {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(crdGVK)
		name := plural + "." + p.cfg.GroupVersion.Group
		if err := p.c.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return fmt.Errorf("reading CustomResourceDefinition %s (the kit needs get on customresourcedefinitions): %w", name, err)
		}
		problems = append(problems, schemaProblems(crd, p.cfg.GroupVersion.Version)...)
	}
	if len(problems) > 0 {
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	const kept = "kept as written"
	created, err := p.create(ctx, p.cfg.Versions[0], func(u *unstructured.Unstructured) {
		setField(u, kept, p.unacted()...)
		addGate(u)
	})
	if err != nil {
		return err
	}
	if got, _, _ := unstructured.NestedString(created.Object, append([]string{"spec"}, p.unacted()...)...); got != kept {
		return fmt.Errorf("%s %s/%s created with spec.%s=%q reads back %q: the API server dropped a field its schema does not know (x-kubernetes-preserve-unknown-fields)",
			created.GetKind(), p.ns, p.name, p.cfg.UnactedField, kept, got)
	}
	if !slices.Contains(gates(created), holdGate) {
		return fmt.Errorf("%s %s/%s created with rollout gate %s reads back gates %v", created.GetKind(), p.ns, p.name, holdGate, gates(created))
	}
	return nil
}

// schemaProblems says what CRD crd's schema of version lacks.
func schemaProblems(crd *unstructured.Unstructured, version string) []string {
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var v map[string]any
	for _, item := range versions {
		if m, ok := item.(map[string]any); ok && m["name"] == version {
			v = m
		}
	}
	name := crd.GetName()
	if v == nil {
		return []string{fmt.Sprintf("CRD %s serves no version %s", name, version)}
	}
	var out []string
	if _, ok, _ := unstructured.NestedMap(v, "subresources", "status"); !ok {
		out = append(out, fmt.Sprintf("CRD %s has no status subresource", name))
	}
	root := []string{"schema", "openAPIV3Schema", "properties"}
	prop := func(path ...string) (map[string]any, bool) {
		var full []string
		full = append(full, root...)
		for i, p := range path {
			if i > 0 {
				full = append(full, "properties")
			}
			full = append(full, p)
		}
		m, ok, _ := unstructured.NestedMap(v, full...)
		return m, ok
	}
	listMap := func(field, key string, path ...string) {
		m, ok := prop(path...)
		switch {
		case !ok:
			out = append(out, fmt.Sprintf("CRD %s: no %s in its schema", name, field))
		case m["x-kubernetes-list-type"] != "map":
			out = append(out, fmt.Sprintf("CRD %s: %s is x-kubernetes-list-type %v, not map (keyed by %s): two writers' entries would replace each other", name, field, orUnset(m["x-kubernetes-list-type"]), key))
		default:
			keys, _, _ := unstructured.NestedStringSlice(m, "x-kubernetes-list-map-keys")
			if !slices.Contains(keys, key) {
				out = append(out, fmt.Sprintf("CRD %s: %s is a list map keyed by %v, not %s", name, field, keys, key))
			}
		}
	}
	listMap("spec.rolloutGates", "name", "spec", "rolloutGates")
	listMap("status.conditions", "type", "status", "conditions")
	if m, ok := prop("spec", "deploymentDependencies"); !ok {
		out = append(out, fmt.Sprintf("CRD %s: no spec.deploymentDependencies in its schema", name))
	} else if missing := dropped(m, "provisioningPrerequisites", "upgradePrerequisites"); len(missing) > 0 {
		out = append(out, fmt.Sprintf("CRD %s: spec.deploymentDependencies declares no %v: the API server prunes them, and the lists the sequencer reads are lost", name, missing))
	} else {
		for _, list := range []string{"provisioningPrerequisites", "upgradePrerequisites"} {
			items, _, _ := unstructured.NestedMap(m, "properties", list, "items")
			if missing := dropped(items, "expressNode", "kind", "expressVersion", "deploymentRevision", "podConditionType", "conditionStatus"); len(missing) > 0 {
				out = append(out, fmt.Sprintf("CRD %s: spec.deploymentDependencies.%s items declare no %v: the API server prunes them from each prerequisite", name, list, missing))
			}
		}
	}
	if m, ok := prop("status", "conditions"); ok {
		items, _, _ := unstructured.NestedMap(m, "items")
		if missing := dropped(items, "type", "status", "reason", "message", "lastTransitionTime", "observedGeneration"); len(missing) > 0 {
			out = append(out, fmt.Sprintf("CRD %s: status.conditions items declare no %v: the API server prunes them from the sequencer's PrerequisitesReady", name, missing))
		}
	}
	if m, ok := prop("spec", "up"); !ok || m["type"] != "boolean" {
		out = append(out, fmt.Sprintf("CRD %s: spec.up is not a boolean in its schema", name))
	}
	return out
}

// dropped returns which of fields an object schema m neither declares nor
// keeps as unknown fields (x-kubernetes-preserve-unknown-fields): the API
// server prunes them.
func dropped(m map[string]any, fields ...string) []string {
	if keep, _ := m["x-kubernetes-preserve-unknown-fields"].(bool); keep {
		return nil
	}
	props, _, _ := unstructured.NestedMap(m, "properties")
	var out []string
	for _, f := range fields {
		if _, ok := props[f]; !ok {
			out = append(out, f)
		}
	}
	return out
}

func orUnset(v any) any {
	if v == nil {
		return "(unset)"
	}
	return v
}
