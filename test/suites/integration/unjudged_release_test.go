package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/webhook"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
)

// A webhook replica rolled out with --recheck-releases=false sits behind the
// same registration as the others: the sequencer cannot see which replica
// its write reaches. A release it planned on a scoped read reaches such a
// replica (here express-sequencer's own validating webhook for Frontends,
// served with the guard off and registered for this namespace beside the
// harness's): refused, naming why. The sequencer then reads the whole tenant
// itself, and the release, planned on that read, goes.
func TestAReleaseAReplicaWithoutTheGuardRefusesIsPlannedAgainOnTheWholeTenant(t *testing.T) {
	stop := startSequencer(t)
	ns, _ := settledTenant(t, 2)
	stop()
	ctx := context.Background()
	unjudgingReplica(t, ns)
	setVersion(t, ns, v2, "fe1")
	fe1 := read(t, ns, "fe1")
	require.True(t, v2alpha1.IsGated(fe1), "the webhook gates fe1's change")
	// The API server sees a new webhook configuration a moment after it is
	// written: probe with dry-run releases until the replica refuses one.
	require.Eventually(t, func() bool {
		_, err := dryRunGuardedRelease(fe1)
		return apierrors.HasStatusCause(err, v2alpha1.CauseReleaseNotJudged)
	}, 30*time.Second, 100*time.Millisecond, "the replica without the guard is registered")

	cache := &laggingCache{Client: harness.Client}
	cache.reads = copyOf(t, append(append(podsOf(t, ns), guardAndNamespace(t, ns)...), read(t, ns, "be"), fe1)...)
	tenant := rollout.Tenant{Namespace: ns, ClusterName: "acme"}
	r := scopedReconciler(cache, harness.Client)
	pastSettle()
	_, err := r.Reconcile(ctx, tenant)
	require.Error(t, err, "the release planned on a scoped read meets the replica that judges none")
	assert.True(t, apierrors.HasStatusCause(err, v2alpha1.CauseReleaseNotJudged), "refused as unjudged: %v", err)
	assert.True(t, v2alpha1.IsGated(read(t, ns, "fe1")), "fe1 is not released unjudged")

	whole, err := auditmetrics.SumWhere("express_sequencer_release_reads_total", map[string]string{"read": rollout.ReadTenant, "fallback": "guard"})
	require.NoError(t, err)
	_, err = r.Reconcile(ctx, tenant)
	require.NoError(t, err, "planned again on the whole tenant, the release goes through the replica")
	assert.False(t, v2alpha1.IsGated(read(t, ns, "fe1")), "fe1 is released")
	after, err := auditmetrics.SumWhere("express_sequencer_release_reads_total", map[string]string{"read": rollout.ReadTenant, "fallback": "guard"})
	require.NoError(t, err)
	assert.Greater(t, after, whole, "counted as a read of the whole tenant for want of a guard in every replica")
}

// dryRunGuardedRelease removes the sequencer's gate from n in a dry run, as
// a release planned on a scoped read is written, and returns n as the API
// server would store it: the new webhook registrations probed.
func dryRunGuardedRelease(n v2alpha1.Node) (v2alpha1.Node, error) {
	n = n.DeepCopyObject().(v2alpha1.Node)
	base := n.DeepCopyObject().(v2alpha1.Node)
	n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
	err := harness.Client.Patch(context.Background(), n, client.MergeFrom(base), client.DryRunAll, client.FieldOwner(v2alpha1.FieldManagerGuardedRelease))
	return n, err
}

// unjudgingReplica serves, over TLS, express-sequencer's validating webhook
// for Frontends as a replica run with --recheck-releases=false serves it,
// and registers it for the Frontends of namespace ns, failing closed.
func unjudgingReplica(t *testing.T, ns string) {
	t.Helper()
	hooks := webhook.Handlers(harness.Client.Scheme(), harness.Client, harness.Client, webhook.Settings{
		Orders: defaults.Builtin(), Grouping: grouping, Clock: clock.RealClock{}, SequencerUsers: []string{leastPrivilegeUser},
		RecheckReleases: false, DefaultMode: v2alpha1.ModeEnforce,
	})
	clientConfig := controlplane.ServeWebhook(t, hooks[webhook.ValidateFrontendPath], webhook.ValidateFrontendPath)
	config := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "zz-unjudging-replica-"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "vfrontend.unjudging.example.com",
			ClientConfig:            clientConfig,
			Rules:                   frontendUpdates,
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		}},
	}
	require.NoError(t, harness.Client.Create(context.Background(), config))
	t.Cleanup(func() { assert.NoError(t, harness.Client.Delete(context.Background(), config)) })
}

// frontendUpdates are the rules of a webhook called on every update of a
// Frontend.
var frontendUpdates = []admissionregistrationv1.RuleWithOperations{{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Update},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{v2alpha1.GroupVersion.Group}, APIVersions: []string{v2alpha1.GroupVersion.Version}, Resources: []string{"frontends"}},
}}

// A mutating webhook of an earlier version, called during a rolling update
// of the webhooks, does not know the field manager a release planned on a
// scoped read is written as: it takes the write for someone else's removal
// of the sequencer's gate and puts the gate back, and the API server stores
// the write. The sequencer does not take that for a release — no release
// counted, no Release Event — and plans again on the whole tenant, whose
// release it writes as its own field manager: that one goes.
func TestAReleaseAWebhookUndoesIsNotTakenForOne(t *testing.T) {
	stop := startSequencer(t)
	ns, _ := settledTenant(t, 2)
	stop()
	ctx := context.Background()
	clientConfig := controlplane.ServeWebhook(t, &admission.Webhook{Handler: admission.HandlerFunc(func(_ context.Context, req admission.Request) admission.Response {
		var opts metav1.PatchOptions
		_ = json.Unmarshal(req.Options.Raw, &opts)
		if opts.FieldManager != v2alpha1.FieldManagerGuardedRelease {
			return admission.Allowed("")
		}
		return admission.PatchResponseFromRaw(req.Object.Raw, putGateBack(t, req.Object.Raw))
	})}, "/mutate")
	config := &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "zz-earlier-version-"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "mfrontend.earlier.example.com",
			ClientConfig:            clientConfig,
			Rules:                   frontendUpdates,
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
		}},
	}
	require.NoError(t, harness.Client.Create(ctx, config))
	t.Cleanup(func() { assert.NoError(t, harness.Client.Delete(context.Background(), config)) })
	setVersion(t, ns, v2, "fe1")
	fe1 := read(t, ns, "fe1")
	require.True(t, v2alpha1.IsGated(fe1), "the webhook gates fe1's change")
	require.Eventually(t, func() bool {
		n, err := dryRunGuardedRelease(fe1)
		return err == nil && v2alpha1.IsGated(n)
	}, 30*time.Second, 100*time.Millisecond, "the earlier version's webhook is registered")

	cache := &laggingCache{Client: harness.Client}
	cache.reads = copyOf(t, append(append(podsOf(t, ns), guardAndNamespace(t, ns)...), read(t, ns, "be"), fe1)...)
	r := scopedReconciler(cache, harness.Client)
	recorder := events.NewFakeRecorder(100)
	r.Recorder = recorder
	pastSettle()
	// Where the first pass did not plan on the scoped read (its premise),
	// the log says why it read the tenant whole.
	_, err := r.Reconcile(log.IntoContext(ctx, testr.NewWithOptions(t, testr.Options{Verbosity: 1})), rollout.Tenant{Namespace: ns, ClusterName: "acme"})
	require.Error(t, err, "the write was stored, but not as a release")
	assert.Contains(t, err.Error(), "the write was stored with the gate still on")
	assert.True(t, v2alpha1.IsGated(read(t, ns, "fe1")), "fe1 stays gated")
	for len(recorder.Events) > 0 {
		assert.NotContains(t, <-recorder.Events, v2alpha1.ReasonReleased, "no Event of a release that was undone")
	}

	_, err = r.Reconcile(ctx, rollout.Tenant{Namespace: ns, ClusterName: "acme"})
	require.NoError(t, err, "planned again on the whole tenant, written as the sequencer's own")
	assert.False(t, v2alpha1.IsGated(read(t, ns, "fe1")), "fe1 is released")
}

// putGateBack returns the Frontend raw with the sequencer's gate on, as an
// earlier version's mutating webhook put it back.
func putGateBack(t *testing.T, raw []byte) []byte {
	n := &v2alpha1.Frontend{}
	require.NoError(t, json.Unmarshal(raw, n))
	n.Spec.AddGate(v2alpha1.GateSequencer)
	out, err := json.Marshal(n)
	require.NoError(t, err)
	return out
}
