package integration

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
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
	"github.com/medallia/express-sequencer/internal/sequencer"
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
	ctx := context.Background()
	ns, r, err := firstPassOnScopedRead(t, scopedPassScene{
		register: unjudgingReplica,
		// The API server sees a new webhook configuration a moment after
		// it is written: probe with dry-run releases until the replica
		// refuses one.
		registered: func(fe1 v2alpha1.Node) bool {
			_, err := dryRunGuardedRelease(fe1)
			return apierrors.HasStatusCause(err, v2alpha1.CauseReleaseNotJudged)
		},
		what: "the replica without the guard is registered",
	})
	tenant := rollout.Tenant{Namespace: ns, ClusterName: "acme"}
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

// scopedPassScene is what a test whose premise is a pass planned on the
// scoped read sets up around fe1's change.
type scopedPassScene struct {
	// register registers a webhook for namespace ns, before fe1's change.
	register func(t *testing.T, ns string)
	// registered probes, with fe1 as changed, whether the API server calls
	// it yet; what says what it waits for.
	registered func(fe1 v2alpha1.Node) bool
	what       string
	// edit, if set, changes the reconciler before its pass.
	edit func(*sequencer.Reconciler)
}

// firstPassOnScopedRead settles a two-node tenant, sets scene up, changes
// fe1 and runs one pass of a scoped reconciler whose cache holds the tenant
// as it is then; it returns the namespace, the reconciler and the pass's
// error. A scoped read is two reads by name that must find the workload
// one moment, and a write between them — a machine's heartbeat, which KWOK
// writes every one to three seconds, as the reads stretch on a loaded
// machine — has the tenant read whole, as it should; the pass is then not
// the one the test is about, and it runs again on a new tenant, up to
// three times, saying why.
func firstPassOnScopedRead(t *testing.T, scene scopedPassScene) (string, *sequencer.Reconciler, error) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		stop := startSequencer(t)
		ns, _ := settledTenant(t, 2)
		stop()
		scene.register(t, ns)
		setVersion(t, ns, v2, "fe1")
		fe1 := read(t, ns, "fe1")
		require.True(t, v2alpha1.IsGated(fe1), "the webhook gates fe1's change")
		require.Eventually(t, func() bool { return scene.registered(fe1) }, 30*time.Second, 100*time.Millisecond, scene.what)

		cache := &laggingCache{Client: harness.Client}
		cache.reads = copyOf(t, append(append(podsOf(t, ns), guardAndNamespace(t, ns)...), read(t, ns, "be"), fe1)...)
		r := scopedReconciler(cache, harness.Client)
		if scene.edit != nil {
			scene.edit(r)
		}
		pastSettle()
		whole, err := passOnScopedRead(context.Background(), r, rollout.Tenant{Namespace: ns, ClusterName: "acme"})
		if whole == "" {
			return ns, r, err
		}
		require.Less(t, attempt, 3, "the first pass read the tenant whole %d times, the last: %s", attempt, whole)
		t.Logf("the first pass in %s read the tenant whole (%s): running the test again on a new tenant", ns, whole)
	}
}

// passOnScopedRead runs one pass of r over tenant and returns, where it did
// not plan on the scoped read but read the tenant whole, why, as r logs
// it, and the pass's error.
func passOnScopedRead(ctx context.Context, r *sequencer.Reconciler, tenant rollout.Tenant) (whole string, err error) {
	var mu sync.Mutex
	logger := funcr.New(func(_, args string) {
		if strings.Contains(args, `"Read the whole tenant to plan a release"`) {
			mu.Lock()
			defer mu.Unlock()
			whole = args
		}
	}, funcr.Options{Verbosity: 1})
	_, err = r.Reconcile(log.IntoContext(ctx, logger), tenant)
	mu.Lock()
	defer mu.Unlock()
	return whole, err
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
	ctx := context.Background()
	var recorder *events.FakeRecorder
	ns, r, err := firstPassOnScopedRead(t, scopedPassScene{
		register: earlierVersionsWebhook,
		registered: func(fe1 v2alpha1.Node) bool {
			n, err := dryRunGuardedRelease(fe1)
			return err == nil && v2alpha1.IsGated(n)
		},
		what: "the earlier version's webhook is registered",
		edit: func(r *sequencer.Reconciler) {
			recorder = events.NewFakeRecorder(100)
			r.Recorder = recorder
		},
	})
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

// earlierVersionsWebhook serves, over TLS, a mutating webhook for the
// Frontends of namespace ns as an earlier version's was: it puts the
// sequencer's gate back on every write of the field manager a release
// planned on a scoped read is written as, which it does not know.
func earlierVersionsWebhook(t *testing.T, ns string) {
	t.Helper()
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
	require.NoError(t, harness.Client.Create(context.Background(), config))
	t.Cleanup(func() { assert.NoError(t, harness.Client.Delete(context.Background(), config)) })
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
