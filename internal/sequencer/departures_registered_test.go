package sequencer_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/sequencer"
	"github.com/medallia/express-sequencer/internal/webhook"
)

// The node webhooks as generated are sent every deletion of a node, so
// deletions are dated; a configuration that does not exist yet, a webhook
// no longer sent DELETE (a stale manifest, an overlay) or failing open is
// reported the moment it is seen, and the report clears once the
// configuration is as generated again. The configuration watched is a
// copy of the generated one under another name, selecting no namespace,
// so the webhooks the other tests use stay as they are.
func TestNodeWebhooksNotSentEveryDeletionAreReported(t *testing.T) {
	h := apiServer.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var generated admissionregistrationv1.ValidatingWebhookConfiguration
	require.NoError(t, h.Client.Get(ctx, client.ObjectKey{Name: webhook.ValidatingConfigurationName}, &generated))
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "departures-registered-test"}, Webhooks: generated.Webhooks}
	for i := range cfg.Webhooks {
		cfg.Webhooks[i].NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"express.medallia.com/test": "no-namespace"}}
	}

	mgr, err := ctrl.NewManager(h.Config, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)
	d := &sequencer.DeparturesRegistered{Reader: h.Client, Guard: sequencer.Guard{
		Configuration: cfg.Name, Webhooks: webhook.ReleaseGuardWebhooks, Paths: webhook.ReleaseGuardPaths,
	}}
	require.NoError(t, d.SetupWithManager(mgr))
	go func() { _ = mgr.Start(ctx) }()

	reported := func(want ...string) {
		t.Helper()
		var got []string
		require.Eventually(t, func() bool { got = d.Problems(); return slices.Equal(got, want) }, 30*time.Second, 20*time.Millisecond,
			"want %q", want)
		require.Equal(t, want, got)
		if len(want) > 0 {
			assert.Equal(t, 1.0, sequencer.DeparturesUndated(), "the gauge says deletions are not dated")
		} else {
			assert.Equal(t, 0.0, sequencer.DeparturesUndated(), "the gauge says deletions are dated")
		}
	}
	edit := func(change func(w *admissionregistrationv1.ValidatingWebhook)) {
		t.Helper()
		require.NoError(t, h.Client.Get(ctx, client.ObjectKeyFromObject(cfg), cfg))
		for i := range cfg.Webhooks {
			change(&cfg.Webhooks[i])
		}
		require.NoError(t, h.Client.Update(ctx, cfg))
	}

	reported("ValidatingWebhookConfiguration departures-registered-test does not exist")

	require.NoError(t, h.Client.Create(ctx, cfg))
	t.Cleanup(func() { _ = h.Client.Delete(context.Background(), cfg) })
	reported()

	edit(func(w *admissionregistrationv1.ValidatingWebhook) {
		if w.Name != webhook.ReleaseGuardWebhooks["frontends"] {
			return
		}
		for j := range w.Rules {
			w.Rules[j].Operations = slices.DeleteFunc(w.Rules[j].Operations, func(op admissionregistrationv1.OperationType) bool { return op == admissionregistrationv1.Delete })
		}
	})
	reported("webhook vfrontend.express.medallia.com is not sent deletions of frontends (express.medallia.com/v2alpha1)")

	edit(func(w *admissionregistrationv1.ValidatingWebhook) {
		if w.Name == webhook.ReleaseGuardWebhooks["backends"] {
			w.FailurePolicy = ptr.To(admissionregistrationv1.Ignore)
		}
	})
	reported("webhook vbackend.express.medallia.com lets deletions through when it cannot be reached (failurePolicy Ignore)",
		"webhook vfrontend.express.medallia.com is not sent deletions of frontends (express.medallia.com/v2alpha1)")

	edit(func(w *admissionregistrationv1.ValidatingWebhook) {
		for _, g := range generated.Webhooks {
			if g.Name == w.Name {
				w.Rules, w.FailurePolicy = g.Rules, g.FailurePolicy
			}
		}
	})
	reported()

	require.NoError(t, h.Client.Delete(ctx, cfg))
	reported("ValidatingWebhookConfiguration departures-registered-test does not exist")
}
