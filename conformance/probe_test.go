package conformance

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestAConditionRewrittenIsToldFromOneLeftAsItWas(t *testing.T) {
	node := func(gen int64, extra map[string]any) *unstructured.Unstructured {
		c := map[string]any{"type": probeCondition, "status": "True", "reason": "Probe", "observedGeneration": gen}
		for k, v := range extra {
			c[k] = v
		}
		return &unstructured.Unstructured{Object: map[string]any{"status": map[string]any{"conditions": []any{
			map[string]any{"type": "Available", "status": "True"}, c,
		}}}}
	}
	applied := conditionFields(node(1, nil), probeCondition)
	assert.Equal(t, applied, conditionFields(node(1, nil), probeCondition), "left as it was")
	assert.Equal(t, "observedGeneration 1 → 3", changedFields(applied, conditionFields(node(3, nil), probeCondition)))
	assert.Equal(t, `message (absent) → "rewritten"`, changedFields(applied, conditionFields(node(1, map[string]any{"message": "rewritten"}), probeCondition)))
	assert.Nil(t, conditionFields(&unstructured.Unstructured{Object: map[string]any{}}, probeCondition), "none")
}

func TestATemplateIsComparedWhole(t *testing.T) {
	tmpl := func(image string) corev1.PodTemplateSpec {
		return corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "express", Image: image}}}}
	}
	assert.True(t, sameTemplate(tmpl("express:1"), tmpl("express:1")))
	assert.False(t, sameTemplate(tmpl("express:1"), tmpl("express:2")), "a new image under the same labels is a new template")
	assert.Equal(t, "its pod spec (containers, images, volumes or the like)", templateChange(tmpl("express:1"), tmpl("express:2")), "and says so")
}

func TestWhichFieldsASchemaPrunes(t *testing.T) {
	for name, c := range map[string]struct {
		schema map[string]any
		want   []string
	}{
		"an object declaring both lists keeps them": {schema: map[string]any{"type": "object", "properties": map[string]any{
			"provisioningPrerequisites": map[string]any{}, "upgradePrerequisites": map[string]any{}}}},
		"an object with no properties prunes both": {schema: map[string]any{"type": "object"},
			want: []string{"provisioningPrerequisites", "upgradePrerequisites"}},
		"an object declaring one prunes the other": {schema: map[string]any{"type": "object", "properties": map[string]any{"upgradePrerequisites": map[string]any{}}},
			want: []string{"provisioningPrerequisites"}},
		"an object that keeps unknown fields keeps both": {schema: map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, c.want, dropped(c.schema, "provisioningPrerequisites", "upgradePrerequisites"))
		})
	}
}

// The project's own CRD carries every field the contract asks for; with the
// prerequisite lists or a condition's fields left undeclared (pruned as
// written) the crd-fields clause names what is lost.
func TestASchemaThatPrunesTheListsOrAConditionsFieldsIsNamed(t *testing.T) {
	load := func(t *testing.T) *unstructured.Unstructured {
		data, err := os.ReadFile("../config/crd/bases/express.medallia.com_frontends.yaml")
		require.NoError(t, err)
		u := &unstructured.Unstructured{}
		require.NoError(t, yaml.Unmarshal(data, &u.Object))
		return u
	}
	props := []string{"spec", "versions"}
	at := func(u *unstructured.Unstructured, path ...string) map[string]any {
		versions, _, _ := unstructured.NestedSlice(u.Object, props...)
		m, _, _ := unstructured.NestedMap(versions[0].(map[string]any), path...)
		return m
	}
	set := func(u *unstructured.Unstructured, m map[string]any, path ...string) {
		versions, _, _ := unstructured.NestedSlice(u.Object, props...)
		v := versions[0].(map[string]any)
		require.NoError(t, unstructured.SetNestedMap(v, m, path...))
		versions[0] = v
		require.NoError(t, unstructured.SetNestedSlice(u.Object, versions, props...))
	}
	schema := []string{"schema", "openAPIV3Schema", "properties"}
	deps := append(append([]string{}, schema...), "spec", "properties", "deploymentDependencies")
	items := append(append([]string{}, schema...), "status", "properties", "conditions", "items")

	crd := load(t)
	assert.Empty(t, schemaProblems(crd, "v2alpha1"), "the project's own CRD")

	crd = load(t)
	m := at(crd, deps...)
	delete(m, "properties")
	set(crd, m, deps...)
	assert.Equal(t, []string{"CRD frontends.express.medallia.com: spec.deploymentDependencies declares no [provisioningPrerequisites upgradePrerequisites]: the API server prunes them, and the lists the sequencer reads are lost"},
		schemaProblems(crd, "v2alpha1"))

	crd = load(t)
	upgradeItems := append(append([]string{}, deps...), "properties", "upgradePrerequisites", "items")
	m = at(crd, upgradeItems...)
	m["properties"] = map[string]any{"expressNode": map[string]any{"type": "string"}, "kind": map[string]any{"type": "string"}}
	set(crd, m, upgradeItems...)
	assert.Equal(t, []string{"CRD frontends.express.medallia.com: spec.deploymentDependencies.upgradePrerequisites items declare no [expressVersion deploymentRevision podConditionType conditionStatus]: the API server prunes them from each prerequisite"},
		schemaProblems(crd, "v2alpha1"))

	crd = load(t)
	m = at(crd, items...)
	m["properties"] = map[string]any{"type": map[string]any{"type": "string"}}
	set(crd, m, items...)
	assert.Equal(t, []string{"CRD frontends.express.medallia.com: status.conditions items declare no [status reason message lastTransitionTime observedGeneration]: the API server prunes them from the sequencer's PrerequisitesReady"},
		schemaProblems(crd, "v2alpha1"))
}
