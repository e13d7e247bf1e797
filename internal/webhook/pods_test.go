package webhook_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/webhook"
)

// The pod admission webhook (DESIGN v2 §4b).

func pod(ns, name string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "express", Image: "express"}}},
	}
}

func gates(p *corev1.Pod) []string {
	var out []string
	for _, g := range p.Spec.SchedulingGates {
		out = append(out, g.Name)
	}
	return out
}

func TestAPodOfANodeWhosePredecessorsAreNotReadyIsCreatedSchedulingGated(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	for _, n := range seedTenant(ns)[:2] { // acme-be and acme-fe1, no pods yet
		require.NoError(t, c.Create(ctx, n))
	}

	fe1 := pod(ns, "acme-fe1-0", map[string]string{v2alpha1.LabelNode: "acme-fe1"})
	fe1.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/other"}}
	require.NoError(t, c.Create(ctx, fe1))
	assert.Equal(t, []string{"example.com/other", v2alpha1.GateSequencer}, gates(fe1), "its own gate is added next to any other")

	be := pod(ns, "acme-be-0", map[string]string{v2alpha1.LabelNode: "acme-be"})
	require.NoError(t, c.Create(ctx, be))
	assert.Empty(t, gates(be), "the backend has no provisioning predecessor")

	ordinary := pod(ns, "sidecar", map[string]string{"app": "sidecar"})
	require.NoError(t, c.Create(ctx, ordinary))
	assert.Empty(t, gates(ordinary), "a pod without the node label is never sent to the webhook")

	t.Run("a dry-run create shows the gate and stores nothing", func(t *testing.T) {
		dry := pod(ns, "acme-fe1-dry", map[string]string{v2alpha1.LabelNode: "acme-fe1"})
		require.NoError(t, c.Create(ctx, dry, client.DryRunAll))
		assert.Equal(t, []string{v2alpha1.GateSequencer}, gates(dry))
		err := c.Get(ctx, client.ObjectKeyFromObject(dry), &corev1.Pod{})
		assert.True(t, apierrors.IsNotFound(err), "nothing stored: %v", err)
	})
}

func TestInAuditAPodIsNeverGatedButNotedWithWhatEnforcingWouldHaveHeldItFor(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	labelled := &corev1.Namespace{}
	require.NoError(t, c.Get(ctx, client.ObjectKey{Name: ns}, labelled))
	labelled.Labels = map[string]string{v2alpha1.LabelSequencing: v2alpha1.ModeAudit}
	require.NoError(t, c.Update(ctx, labelled))
	for _, n := range seedTenant(ns)[:2] { // acme-be and acme-fe1, no pods yet
		require.NoError(t, c.Create(ctx, n))
	}

	fe1 := pod(ns, "acme-fe1-0", map[string]string{v2alpha1.LabelNode: "acme-fe1"})
	fe1.Annotations = map[string]string{"example.com/kept": "as it was"}
	require.NoError(t, c.Create(ctx, fe1))
	assert.Empty(t, gates(fe1), "audit holds no pod")
	assert.Equal(t, "as it was", fe1.Annotations["example.com/kept"])
	assert.Contains(t, fe1.Annotations[v2alpha1.AnnotationWouldHoldPod], "waiting for acme-be (Backend) to be Ready",
		"what enforcing would have held it for")

	bare := pod(ns, "acme-fe1-1", map[string]string{v2alpha1.LabelNode: "acme-fe1"})
	require.NoError(t, c.Create(ctx, bare))
	assert.Empty(t, gates(bare))
	assert.Contains(t, bare.Annotations[v2alpha1.AnnotationWouldHoldPod], "waiting for acme-be", "noted on a pod with no annotations too")

	be := pod(ns, "acme-be-0", map[string]string{v2alpha1.LabelNode: "acme-be"})
	require.NoError(t, c.Create(ctx, be))
	assert.NotContains(t, be.Annotations, v2alpha1.AnnotationWouldHoldPod, "the backend would have started at once")
}

func TestAPodNamingNoNodeIsAdmittedUnchangedWithAWarning(t *testing.T) {
	ctx := context.Background()
	wc, w := warningClient(t)
	ns := namespace(t)

	orphan := pod(ns, "orphan", map[string]string{v2alpha1.LabelNode: "acme-fe7"})
	require.NoError(t, wc.Create(ctx, orphan))
	assert.Empty(t, gates(orphan))
	assert.Contains(t, w.all(), "label express.medallia.com/node=acme-fe7 names no Backend or Frontend in namespace "+ns+": the pod is not held for its prerequisites")

	odd := pod(ns, "odd", map[string]string{v2alpha1.LabelNode: "Acme_FE1"})
	require.NoError(t, wc.Create(ctx, odd))
	assert.Empty(t, gates(odd))
	assert.True(t, containsSubstring(w.all(), `label express.medallia.com/node="Acme_FE1" names no Express node`), w.all())
}

// The sequencer's scheduling gate on a pod can be removed by the sequencer
// only: anyone else — even a cluster admin, claiming its field manager — is
// refused with the way to let the node's pods start regardless. Nor can a
// held pod's node label change, by anyone: it would be judged, and let go,
// as another node's (or, its label gone, by no webhook). Other gates and
// other updates are left alone.
func TestOnlyTheSequencerRemovesItsPodSchedulingGate(t *testing.T) {
	ctx := context.Background()
	h := env(t)
	c := h.Client
	ns := namespace(t)
	for _, n := range seedTenant(ns)[:2] {
		require.NoError(t, c.Create(ctx, n))
	}
	fe1 := pod(ns, "acme-fe1-0", map[string]string{v2alpha1.LabelNode: "acme-fe1"})
	fe1.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: "example.com/other"}}
	require.NoError(t, c.Create(ctx, fe1))
	require.Equal(t, []string{"example.com/other", v2alpha1.GateSequencer}, gates(fe1))

	user, err := h.Env.AddUser(envtest.User{Name: "eve", Groups: []string{"system:masters"}}, h.Config)
	require.NoError(t, err)
	eve, err := client.New(user.Config(), client.Options{Scheme: scheme.New()})
	require.NoError(t, err)

	ungate := func(who client.Client, gate string) error {
		p := &corev1.Pod{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(fe1), p))
		p.Spec.SchedulingGates = slices.DeleteFunc(p.Spec.SchedulingGates, func(g corev1.PodSchedulingGate) bool { return g.Name == gate })
		return who.Update(ctx, p, client.FieldOwner(v2alpha1.FieldManager))
	}
	err = ungate(eve, v2alpha1.GateSequencer)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.schedulingGates: the express.medallia.com/sequencer gate of pod acme-fe1-0 is removed by express-sequencer only")
	assert.Contains(t, err.Error(), "annotate the node express.medallia.com/ignore-prerequisites=true")

	relabel := func(who client.Client, node string) error {
		p := &corev1.Pod{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(fe1), p))
		if node == "" {
			delete(p.Labels, v2alpha1.LabelNode)
		} else {
			p.Labels[v2alpha1.LabelNode] = node
		}
		return who.Update(ctx, p)
	}
	for _, who := range []client.Client{eve, c} {
		for _, node := range []string{"acme-be", ""} {
			err := relabel(who, node)
			require.Error(t, err, "a held pod relabelled to %q", node)
			assert.Contains(t, err.Error(), "metadata.labels[express.medallia.com/node]: pod acme-fe1-0 is held by the express.medallia.com/sequencer scheduling gate until the prerequisites of node acme-fe1 are Ready")
		}
	}

	require.NoError(t, ungate(eve, "example.com/other"), "another gate is anyone's to remove")
	p := &corev1.Pod{}
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(fe1), p))
	p.Labels["team"] = "express"
	require.NoError(t, eve.Update(ctx, p), "other updates go through")

	require.NoError(t, ungate(c, v2alpha1.GateSequencer), "the sequencer's own identity removes it")
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(fe1), p))
	assert.Empty(t, gates(p))
}

// A pod the Express operator binds to a machine (spec.nodeName, e.g. local
// volumes) while its node may not start cannot wait scheduling-gated (the
// API server forbids a gate next to nodeName): the webhook refuses it
// itself, naming the node and what it waits for.
func TestAPodBoundToAMachineWhileItsNodeMayNotStartIsRefusedNamingWhatItWaitsFor(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	for _, n := range seedTenant(ns)[:2] {
		require.NoError(t, c.Create(ctx, n))
	}
	p := pod(ns, "acme-fe1-0", map[string]string{v2alpha1.LabelNode: "acme-fe1"})
	p.Spec.NodeName = "worker-1"
	err := c.Create(ctx, p)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "spec.nodeName")
	assert.Contains(t, err.Error(), "acme-fe1", "the refusal names the node that is held")
	assert.Contains(t, err.Error(), "acme-be", "and the prerequisite it waits for")
}

// The sequencer counts on the release guard's pod webhook selecting pod
// updates as ReleaseGuardPods says, no fewer: the registration generated
// from the marker says the same.
func TestTheReleaseGuardsPodSelectionIsWhatItsMarkerRegisters(t *testing.T) {
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, env(t).Client.Get(context.Background(), client.ObjectKey{Name: webhook.ValidatingConfigurationName}, cfg))
	i := slices.IndexFunc(cfg.Webhooks, func(w admissionregistrationv1.ValidatingWebhook) bool {
		return w.Name == webhook.ReleaseGuardWebhooks["pods"]
	})
	require.GreaterOrEqual(t, i, 0)
	assert.Equal(t, webhook.ReleaseGuardPods.ObjectSelector, cfg.Webhooks[i].ObjectSelector)
	assert.Equal(t, webhook.ReleaseGuardPods.MatchConditions, cfg.Webhooks[i].MatchConditions)
}

// A namespace switched from audit to enforce while a node audit admitted
// ungated has a target it was never released for: until the sequencer
// gates it, the Express operator may roll it, and the pod its StatefulSet
// makes for that target — or any target the node was never released for
// — is held for the node's release — the Backend has no provisioning
// predecessor, so the pod rule alone would let it start. A pod without the
// target-hash label is judged by the pod rule, as before.
func TestAfterASwitchToEnforceAPodMadeForATargetItsNodeWasNotReleasedForIsHeld(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	mode := func(m string) {
		labelled := &corev1.Namespace{}
		require.NoError(t, c.Get(ctx, client.ObjectKey{Name: ns}, labelled))
		labelled.Labels = map[string]string{v2alpha1.LabelSequencing: m}
		require.NoError(t, c.Update(ctx, labelled))
	}
	mode(v2alpha1.ModeAudit)
	be := seedTenant(ns)[0]
	require.NoError(t, c.Create(ctx, be))
	require.Empty(t, be.NodeSpec().RolloutGates, "audit adds no gate")
	target := be.GetAnnotations()[v2alpha1.AnnotationTargetHash]
	require.NotEmpty(t, target)
	require.NotEqual(t, target, be.GetAnnotations()[v2alpha1.AnnotationReleasedTarget], "audit recorded no release")
	mode(v2alpha1.ModeEnforce)

	made := pod(ns, "acme-be-0", map[string]string{v2alpha1.LabelNode: "acme-be", v2alpha1.LabelTargetHash: target})
	require.NoError(t, c.Create(ctx, made))
	assert.Equal(t, []string{v2alpha1.GateSequencer}, gates(made), "a pod made for a target acme-be was not released for waits for its release")

	other := pod(ns, "acme-be-1", map[string]string{v2alpha1.LabelNode: "acme-be", v2alpha1.LabelTargetHash: "another-target"})
	require.NoError(t, c.Create(ctx, other))
	assert.Equal(t, []string{v2alpha1.GateSequencer}, gates(other), "a pod of another target acme-be was never released for waits too")
	bare := pod(ns, "acme-be-2", map[string]string{v2alpha1.LabelNode: "acme-be"})
	require.NoError(t, c.Create(ctx, bare))
	assert.Empty(t, gates(bare), "a pod without the target-hash label is judged by the pod rule")
}
