package cli

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// auditJSON is the part of kubectl express audit -o json read here.
type auditJSON struct {
	Tenants []struct {
		Namespace    string `json:"namespace"`
		Tenant       string `json:"tenant"`
		Mode         string `json:"mode"`
		NodeRollouts int    `json:"nodeRollouts"`
		InOrder      int    `json:"inOrder"`
		Findings     []struct {
			Node    string `json:"node"`
			Kind    string `json:"kind"`
			Message string `json:"message"`
			From    string `json:"from"`
		} `json:"findings"`
	} `json:"tenants"`
	Summary struct {
		Violations int `json:"violations"`
	} `json:"summary"`
}

// On the real stack: a tenant rolled out in order, then a pod made by hand
// for its gated fe2's new target. kubectl express audit reports the
// tenant's rollouts, the one violation the order auditor found — from its
// Event and the node's OrderKept condition — and the rest in order; status
// counts the node in its ORDER column.
func TestAuditReportsWhatTheOrderAuditorFound(t *testing.T) {
	h := full.Get(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "audit-"}}
	require.NoError(t, h.Client.Create(ctx, ns))
	applyFile(t, h.Client, ns.Name, render(t, "create", map[string]any{"namespace": ns.Name}))
	settled(t, h.Client, ns.Name)

	fe2 := &v2alpha1.Frontend{}
	require.NoError(t, h.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "acme-fe2"}, fe2))
	require.NoError(t, h.Client.Patch(ctx, fe2, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+v2alpha1.AnnotationPauseRollout+`":"true"}},"spec":{"expressVersion":"express-e689.199"}}`))))
	require.True(t, fe2.Spec.HasGate(v2alpha1.GateSequencer), "fe2 is gated for its new target")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: ns.Name, Labels: map[string]string{
		v2alpha1.LabelNode: "acme-fe2", v2alpha1.LabelTargetHash: fe2.GetAnnotations()[v2alpha1.AnnotationTargetHash]}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "express", Image: "express:express-e689.199"}}}}
	require.NoError(t, h.Client.Create(ctx, pod))
	require.Eventually(t, func() bool {
		n := &v2alpha1.Frontend{}
		return h.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "acme-fe2"}, n) == nil &&
			meta.FindStatusCondition(n.Status.Conditions, v2alpha1.ConditionOrderKept) != nil
	}, 30*time.Second, 100*time.Millisecond, "the auditor finds the pod made by hand")

	kubeconfig, err := h.KubeconfigFile(t.TempDir())
	require.NoError(t, err)
	var got auditJSON
	require.Eventually(t, func() bool {
		out, _, err := express(t, "audit", "-n", ns.Name, "--kubeconfig", kubeconfig, "-o", "json")
		return err == nil && json.Unmarshal([]byte(out), &got) == nil && len(got.Tenants) == 1 && len(got.Tenants[0].Findings) > 0 &&
			got.Tenants[0].Findings[0].From == "Event"
	}, time.Minute, 200*time.Millisecond, "the auditor's Event is written (each try runs the plugin: slow on a loaded machine)")
	tenant := got.Tenants[0]
	assert.Equal(t, "acme", tenant.Tenant)
	assert.Equal(t, "default", tenant.Mode, "no sequencing label: the installation's default")
	assert.GreaterOrEqual(t, tenant.NodeRollouts, 5, "every node's provisioning, and fe2's change")
	require.Len(t, tenant.Findings, 1, "one finding: the Event and the condition say the same")
	assert.Equal(t, "acme-fe2", tenant.Findings[0].Node)
	assert.Equal(t, v2alpha1.ReasonOrderViolation, tenant.Findings[0].Kind)
	assert.Contains(t, tenant.Findings[0].Message, "pod by-hand, of no StatefulSet, was created")
	assert.Equal(t, tenant.NodeRollouts-1, tenant.InOrder)
	assert.Equal(t, 1, got.Summary.Violations)

	text, _, err := express(t, "audit", "-n", ns.Name, "--kubeconfig", kubeconfig)
	require.NoError(t, err)
	t.Logf("kubectl express audit:\n%s", text)
	assert.Contains(t, text, "Order violations (a pod created while its node was gated):")
	assert.Regexp(t, ns.Name+`/acme-fe2 +\S+ ago`, text)
	status, _, err := express(t, "status", "-n", ns.Name, "--kubeconfig", kubeconfig)
	require.NoError(t, err)
	assert.Contains(t, status, "1 out of order")
	assert.Contains(t, status, "Out of order: 1 nodes.")
}
