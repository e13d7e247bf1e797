package webhook_test

import (
	"context"
	"encoding/json"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// Another mutating webhook, called after the pod webhook, may rewrite a
// pod's scheduling gates whole and drop the sequencer's. The pod webhook
// is then called again (reinvocationPolicy IfNeeded), judges the pod again
// and gates it again: otherwise it would start before its predecessors.
func TestAPodWhoseGateALaterWebhookDropsIsGatedAgain(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	var stripped atomic.Int32
	gateStripper(t, ns, &stripped)
	for _, n := range seedTenant(ns)[:2] { // acme-be and acme-fe1, no pods yet
		require.NoError(t, c.Create(ctx, n))
	}
	// The API server sees a new webhook configuration a moment after it is
	// written: probe with dry runs until the stripper is called.
	require.Eventually(t, func() bool {
		probe := pod(ns, "probe", map[string]string{"app": "probe"})
		probe.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/probe"}}
		return c.Create(ctx, probe, client.DryRunAll) == nil && len(probe.Spec.SchedulingGates) == 0
	}, 30*time.Second, 100*time.Millisecond, "the stripper is registered")

	before := stripped.Load()
	fe1 := pod(ns, "acme-fe1-0", map[string]string{v2alpha1.LabelNode: "acme-fe1"})
	require.NoError(t, c.Create(ctx, fe1))
	assert.Greater(t, stripped.Load(), before, "the stripper dropped the gate the pod webhook added")
	assert.Equal(t, []string{v2alpha1.GateSequencer}, gates(fe1), "called again, the pod webhook gated fe1's pod again: the Backend is not Ready")
}

// gateStripper serves, over TLS, a mutating webhook for the pods of
// namespace ns that removes every scheduling gate, and registers it to be
// called after express-sequencer's (configurations are called in the order
// of their names), once (reinvocationPolicy Never). It counts the pods it
// stripped in stripped.
func gateStripper(t *testing.T, ns string, stripped *atomic.Int32) {
	t.Helper()
	clientConfig := controlplane.ServeWebhook(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var p corev1.Pod
		if err := json.Unmarshal(review.Request.Object.Raw, &p); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		if len(p.Spec.SchedulingGates) > 0 {
			stripped.Add(1)
			review.Response.Patch = []byte(`[{"op":"remove","path":"/spec/schedulingGates"}]`)
			review.Response.PatchType = ptr.To(admissionv1.PatchTypeJSONPatch)
		}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(review)
	}), "/strip")

	config := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "zz-gate-stripper-"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "strip.example.com",
			ClientConfig:            clientConfig,
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      ptr.To(admissionregistrationv1.NeverReinvocationPolicy),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		}},
	}
	require.NoError(t, env(t).Client.Create(context.Background(), config))
	t.Cleanup(func() { assert.NoError(t, env(t).Client.Delete(context.Background(), config)) })
}
