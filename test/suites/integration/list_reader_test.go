package integration

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// itemsOf is a list's items as JSON, without their kind and apiVersion
// (which a typed client may leave out).
func itemsOf(t *testing.T, list client.ObjectList) []string {
	t.Helper()
	objs, err := meta.ExtractList(list)
	require.NoError(t, err)
	var out []string
	for _, o := range objs {
		o.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		data, err := json.Marshal(o)
		require.NoError(t, err)
		out = append(out, string(data))
	}
	return out
}

// The fleet view's reader decodes Backends and Frontends as they stream,
// the fresh reads' reader decodes each response once, and both find exactly
// what controller-runtime's client finds: in one namespace, in all of them,
// with a label selector, and in a namespace without any; an error from the
// API server stays one apierrors recognises.
func TestTheFleetAndFreshReadersListWhatTheClientLists(t *testing.T) {
	for name, reader := range map[string]func(*rest.Config, client.Reader) (client.Reader, error){
		"the fleet view's streaming reader": sequencer.FleetReader,
		"the fresh reads' reader":           sequencer.FreshReader,
	} {
		t.Run(name, func(t *testing.T) { listsWhatTheClientLists(t, reader) })
	}
}

func listsWhatTheClientLists(t *testing.T, reader func(*rest.Config, client.Reader) (client.Reader, error)) {
	ctx := context.Background()
	a, b, empty := namespace(t), namespace(t), namespace(t)
	createTenant(t, a, 3, nil)
	createTenant(t, b, 2, nil)
	update(t, a, func(n v2alpha1.Node) {
		labels := n.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["team"] = a // a label no other test's nodes carry
		n.SetLabels(labels)
	}, "fe2")
	r, err := reader(harness.Config, harness.Client)
	require.NoError(t, err)

	for name, opts := range map[string][]client.ListOption{
		"one namespace":    {client.InNamespace(a)},
		"all namespaces":   nil,
		"a label selector": {client.MatchingLabels{"team": a}},
		"no nodes at all":  {client.InNamespace(empty)},
	} {
		for _, kind := range []func() client.ObjectList{
			func() client.ObjectList { return &v2alpha1.BackendList{} },
			func() client.ObjectList { return &v2alpha1.FrontendList{} },
		} {
			// Other tests' tenants (all namespaces) may change between the
			// two lists: they are taken again until nothing did.
			var want, got client.ObjectList
			for try := 0; try < 20; try++ {
				want, got = kind(), kind()
				require.NoError(t, harness.Client.List(ctx, want, opts...), name)
				require.NoError(t, r.List(ctx, got, opts...), name)
				if want.GetResourceVersion() == got.GetResourceVersion() {
					break
				}
			}
			assert.Equal(t, itemsOf(t, want), itemsOf(t, got), "%s: %T", name, want)
			assert.NotEmpty(t, got.GetResourceVersion(), "%s: the list's metadata is read", name)
		}
	}
	var fes v2alpha1.FrontendList
	require.NoError(t, r.List(ctx, &fes, client.InNamespace(a)))
	assert.Len(t, fes.Items, 2, "fe1 and fe2 of the first tenant")
	require.NoError(t, r.List(ctx, &fes, client.MatchingLabels{"team": a}))
	require.Len(t, fes.Items, 1)
	assert.Equal(t, "acme-fe2", fes.Items[0].Name)

	nobody := rest.CopyConfig(harness.Config)
	nobody.Impersonate = rest.ImpersonationConfig{UserName: "someone-without-rights"}
	denied, err := reader(nobody, harness.Client)
	require.NoError(t, err)
	err = denied.List(ctx, &v2alpha1.FrontendList{}, client.InNamespace(a))
	assert.True(t, apierrors.IsForbidden(err), "a denied list is Forbidden: %v", err)
	assert.ErrorContains(t, err, "frontends")
}
