package conformance

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestWhetherAPodCarriesALabelItsTargetWants(t *testing.T) {
	for name, c := range map[string]struct {
		got  string
		ok   bool
		want string
		has  bool
	}{
		"the value wanted carries it":                    {got: "v2", ok: true, want: "v2", has: true},
		"another value does not":                         {got: "v1", ok: true, want: "v2"},
		"a label left off does not":                      {want: "v2"},
		"a label wanted empty may be left off":           {want: "", has: true},
		"a label wanted empty may be there, empty":       {ok: true, want: "", has: true},
		"a label wanted empty but set to a value is not": {got: "r-1", ok: true, want: ""},
	} {
		t.Run(name, func(t *testing.T) { assert.Equal(t, c.has, hasLabel(c.got, c.ok, c.want)) })
	}
}

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
