package sequencer_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// Each request client-go sends kube-apiserver is counted once, by the
// caller its context names, its verb and its resource, as kube-apiserver
// would name them: the paths are client-go's own, not written by hand.
func TestEveryRequestIsCountedByItsCallerVerbAndResource(t *testing.T) {
	h := apiServer.Get(t)
	cfg := rest.CopyConfig(h.Config)
	cfg.Wrap(sequencer.CountRequests)
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	const caller = "counted-by-a-test"
	ctx := sequencer.WithCaller(context.Background(), caller)

	before := map[[2]string]float64{}
	kinds := [][2]string{
		{"create", "namespaces"}, {"get", "namespaces"}, {"update", "namespaces/status"},
		{"list", "pods"}, {"watch", "pods"}, {"list", "frontends"}, {"get", "validatingwebhookconfigurations"},
		{"create", "configmaps"}, {"patch", "configmaps"}, {"apply", "configmaps"}, {"delete", "configmaps"},
		{"deletecollection", "configmaps"}, {"list", "namespaces"},
	}
	for _, k := range kinds {
		before[k] = sequencer.APIRequests(caller, k[0], k[1])
	}

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "counted-"}}
	require.NoError(t, c.Create(ctx, ns))
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(ns), ns))
	require.NoError(t, c.Status().Update(ctx, ns))
	require.NoError(t, c.List(ctx, &corev1.PodList{}, client.InNamespace(ns.Name)))
	w, err := c.Watch(ctx, &corev1.PodList{}, client.InNamespace(ns.Name))
	require.NoError(t, err)
	w.Stop()
	require.NoError(t, c.List(ctx, &v2alpha1.FrontendList{}, client.InNamespace(ns.Name)))
	err = c.Get(ctx, client.ObjectKey{Name: "no-such-configuration"}, &admissionregistrationv1.ValidatingWebhookConfiguration{})
	require.Error(t, err, "a request refused is counted too")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "counted", Namespace: ns.Name}}
	require.NoError(t, c.Create(ctx, cm))
	require.NoError(t, c.Patch(ctx, cm, client.RawPatch("application/merge-patch+json", []byte(`{"data":{"a":"b"}}`))))
	require.NoError(t, c.Apply(ctx, corev1ac.ConfigMap("counted", ns.Name).WithData(map[string]string{"c": "d"}), client.FieldOwner("a-test"), client.ForceOwnership))
	require.NoError(t, c.Delete(ctx, cm, &client.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}))
	require.NoError(t, c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns.Name), client.MatchingLabels{"counted": "yes"}))
	require.NoError(t, c.List(ctx, &corev1.NamespaceList{}, client.MatchingLabels{"counted": "yes"}))

	for _, k := range kinds {
		assert.Equal(t, before[k]+1, sequencer.APIRequests(caller, k[0], k[1]), "%s %s", k[0], k[1])
	}
	assert.Zero(t, sequencer.APIRequests(caller, "get", "discovery"), "nothing of this client's was discovery")

	// A connection counted as one caller's counts what names no other.
	as := rest.CopyConfig(cfg)
	as.Wrap(sequencer.CountAs("counted-as"))
	other, err := client.New(as, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	was, wasCaller := sequencer.APIRequests("counted-as", "get", "namespaces"), sequencer.APIRequests(caller, "get", "namespaces")
	require.NoError(t, other.Get(context.Background(), client.ObjectKeyFromObject(ns), ns))
	require.NoError(t, other.Get(ctx, client.ObjectKeyFromObject(ns), ns))
	assert.Equal(t, was+1, sequencer.APIRequests("counted-as", "get", "namespaces"), "a context of no caller: the connection's")
	assert.Equal(t, wasCaller+1, sequencer.APIRequests(caller, "get", "namespaces"), "a context that names its caller keeps it")
}
