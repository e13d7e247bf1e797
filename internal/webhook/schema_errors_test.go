package webhook_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A field of the wrong type is refused in Kubernetes' words, as the API
// server's schema validation would refuse it — 422 Invalid, the field path
// and the type the schema wants — not in a Go decoder's, and nothing is
// stored.
func TestAFieldOfTheWrongTypeIsRefusedInTheAPIServersWords(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	for _, tc := range []struct {
		name  string
		set   func(u *unstructured.Unstructured)
		field string
		want  string
	}{
		{"an up that is a string", func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, "yes", "spec", "up") },
			"spec.up", `spec.up: Invalid value: "string": must be of type boolean`},
		{"a version that is a number", func(u *unstructured.Unstructured) {
			_ = unstructured.SetNestedField(u.Object, int64(154), "spec", "expressVersion")
		}, "spec.expressVersion", `spec.expressVersion: Invalid value: "number": must be of type string`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(v2alpha1.GroupVersion.String())
			u.SetKind(v2alpha1.KindFrontend)
			u.SetNamespace(ns)
			u.SetName("acme-fe1")
			u.Object["spec"] = map[string]any{"clusterConfig": map[string]any{"clusterName": "acme"}, "expressVersion": "express-e689.151"}
			tc.set(u)
			err := c.Create(ctx, u)
			require.Error(t, err)
			assert.True(t, apierrors.IsInvalid(err), "422 Invalid: %v", err)
			assert.Contains(t, err.Error(), tc.want)
			assert.NotContains(t, err.Error(), "Go struct")
			var status apierrors.APIStatus
			if assert.ErrorAs(t, err, &status) && assert.NotNil(t, status.Status().Details) && assert.NotEmpty(t, status.Status().Details.Causes) {
				assert.Equal(t, tc.field, status.Status().Details.Causes[0].Field, "the cause names the field")
			}
			got := &v2alpha1.Frontend{}
			assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-fe1"}, got)), "nothing is stored")
		})
	}

	// An update too: the stored node stays as it was.
	n := seedNode(ns, "fe2")
	require.NoError(t, c.Create(ctx, n))
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(v2alpha1.GroupVersion.String())
	u.SetKind(v2alpha1.KindFrontend)
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(n), u))
	require.NoError(t, unstructured.SetNestedField(u.Object, "no", "spec", "up"))
	err := c.Update(ctx, u)
	require.Error(t, err)
	assert.True(t, apierrors.IsInvalid(err), "422 Invalid: %v", err)
	assert.Contains(t, err.Error(), `spec.up: Invalid value: "string": must be of type boolean`)
}
