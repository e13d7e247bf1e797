package webhook_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/webhook"
)

// A node's deletion frees the nodes after it as taking it down does; the
// webhook dates it on every node of its tenant that stays, before the node
// goes, so the settle time groups it with the rest of its apply. A dry run
// dates nothing; another tenant's nodes are not touched.
func TestADeletionIsDatedOnTheNodesOfItsTenantThatStay(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	createSeedNodes(t, ns, 4)
	other := seedNode(ns, "fe1")
	other.SetName("globex-fe1")
	other.NodeSpec().ClusterConfig.ClusterName = "globex"
	require.NoError(t, c.Create(ctx, other))
	stays := []v2alpha1.Node{seedNode(ns, "be"), seedNode(ns, "fe1"), seedNode(ns, "fe3")}
	for _, n := range append(stays, other) {
		require.Empty(t, get(t, n).GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt], "%s: no node left yet", n.GetName())
	}

	fe2 := seedNode(ns, "fe2")
	require.NoError(t, c.Delete(ctx, fe2, client.DryRunAll))
	for _, n := range stays {
		assert.Empty(t, get(t, n).GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt], "%s: a dry run dates nothing", n.GetName())
	}

	before := time.Now().Add(-time.Second) // the webhook's clock is this machine's
	require.NoError(t, c.Delete(ctx, fe2))
	for _, n := range stays {
		got := get(t, n).GetAnnotations()
		at, err := time.Parse(time.RFC3339Nano, got[v2alpha1.AnnotationNodeLeftTenantAt])
		if assert.NoError(t, err, "%s: the deletion is dated", n.GetName()) {
			assert.True(t, at.After(before), "%s: dated at the deletion (%s)", n.GetName(), at)
		}
		assert.Empty(t, got[v2alpha1.AnnotationOrderChangedAt], "%s: no change of its own", n.GetName())
	}
	assert.Empty(t, get(t, other).GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt], "another tenant's node is not dated")
	assert.True(t, apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(fe2), fe2)), "fe2 is gone")
}

// A deletion whose date cannot be written on any node that stays is
// refused, and says which nodes and why: left undated, it could let the
// nodes after it go ahead of a change applied with it. One node dated is
// enough (the settle hold is the tenant's): the others' failures are then
// warnings; in audit mode, where nothing is held, so are all of them.
// A ValidatingAdmissionPolicy refuses the updates of the nodes frozen.
func TestADeletionThatCannotBeDatedIsRefusedWithTheReason(t *testing.T) {
	for _, c := range []struct {
		name    string
		frozen  []string
		audit   bool
		refused bool
		want    []string
	}{
		{name: "every node that stays frozen: refused", frozen: []string{"acme-be", "acme-fe1", "acme-fe3"}, refused: true,
			want: []string{"the deletion of acme-fe2 is refused: none of the nodes of tenant acme that stay could be dated", "acme-be: ", "acme-fe1: ", "acme-fe3: ", "is frozen"}},
		{name: "one node frozen: let through, held by the others' dates, with a warning", frozen: []string{"acme-fe3"},
			want: []string{"the deletion of acme-fe2 could not be dated", "acme-fe3: ", "is frozen", "tenant acme is held by the date on acme-be, acme-fe1"}},
		{name: "every node that stays frozen in an audit namespace: let through with a warning", frozen: []string{"acme-be", "acme-fe1", "acme-fe3"}, audit: true,
			want: []string{"the deletion of acme-fe2 could not be dated", "let through, as namespace"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx := context.Background()
			c2, warned := warningClient(t)
			ns := namespace(t)
			if c.audit {
				var namespace corev1.Namespace
				require.NoError(t, c2.Get(ctx, client.ObjectKey{Name: ns}, &namespace))
				namespace.Labels[v2alpha1.LabelSequencing] = v2alpha1.ModeAudit
				require.NoError(t, c2.Update(ctx, &namespace))
			}
			createSeedNodes(t, ns, 4)
			var frozen []v2alpha1.Node
			for _, name := range c.frozen {
				frozen = append(frozen, seedNode(ns, strings.TrimPrefix(name, "acme-")))
			}
			controlplane.Freeze(t, env(t).Client, ns, frozen...)
			fe2 := seedNode(ns, "fe2")
			err := c2.Delete(ctx, fe2)
			got := strings.Join(warned.all(), "\n")
			if c.refused {
				require.Error(t, err, "the deletion is refused")
				got = err.Error()
				assert.NoError(t, c2.Get(ctx, client.ObjectKeyFromObject(fe2), fe2), "fe2 is still there")
				assert.Nil(t, fe2.GetDeletionTimestamp(), "and not being deleted")
			} else {
				require.NoError(t, err, "the deletion goes through")
			}
			for _, w := range c.want {
				assert.Contains(t, got, w)
			}
		})
	}
}

// A node moved to another tenant (a new spec.clusterConfig.clusterName)
// leaves its tenant as if deleted: the nodes it leaves are dated; the
// tenant it joins dates it as a new target of its own.
func TestANodeMovedToAnotherTenantIsDatedOnTheNodesItLeaves(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	createSeedNodes(t, ns, 4)
	before := time.Now().Add(-time.Second)
	fe2 := get(t, seedNode(ns, "fe2"))
	fe2.NodeSpec().ClusterConfig.ClusterName = "globex"
	fe2.NodeSpec().DeploymentDependencies = nil // defaulted anew, in its new tenant
	require.NoError(t, c.Update(ctx, fe2))
	for _, k := range []string{"be", "fe1", "fe3"} {
		at, err := time.Parse(time.RFC3339Nano, get(t, seedNode(ns, k)).GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt])
		if assert.NoError(t, err, "%s: the move is dated", k) {
			assert.True(t, at.After(before), "%s: dated at the move (%s)", k, at)
		}
	}
	moved := get(t, fe2)
	assert.True(t, moved.NodeSpec().HasGate(v2alpha1.GateSequencer), "in its new tenant, a new target: gated")
	assert.Empty(t, moved.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt], "the node moved is not dated as one that stays")
}

// A date the write of which goes through but does not stay — put back by
// the mutating webhook, which here does not take the writer for the
// sequencer (an identity missing from --sequencer-user, say) — is no date:
// with none dated, the deletion is refused.
func TestADeletionWhoseDateIsPutBackIsRefused(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	createSeedNodes(t, ns, 3)
	cfg := rest.CopyConfig(env(t).Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "not-the-sequencer", Groups: []string{"system:masters"}}
	writer, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	require.NoError(t, err)
	hooks := webhook.Handlers(scheme.New(), c, c, webhook.Settings{Orders: defaults.Builtin(), Clock: clock.RealClock{}, DefaultMode: v2alpha1.ModeEnforce, Writer: writer})
	fe2 := get(t, seedNode(ns, "fe2"))
	raw, err := json.Marshal(fe2)
	require.NoError(t, err)
	resp := hooks[webhook.ValidateFrontendPath].Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID: "1", Operation: admissionv1.Delete, Namespace: ns, Name: fe2.GetName(), DryRun: ptr.To(false),
		Kind:      metav1.GroupVersionKind{Group: v2alpha1.GroupVersion.Group, Version: v2alpha1.GroupVersion.Version, Kind: v2alpha1.KindFrontend},
		Resource:  metav1.GroupVersionResource{Group: v2alpha1.GroupVersion.Group, Version: v2alpha1.GroupVersion.Version, Resource: "frontends"},
		OldObject: runtime.RawExtension{Raw: raw},
	}})
	require.False(t, resp.Allowed, "refused")
	assert.Contains(t, resp.Result.Message, "acme-be, acme-fe1: the mutating webhook that admitted the write did not keep the date")
	for _, k := range []string{"be", "fe1"} {
		assert.Empty(t, get(t, seedNode(ns, k)).GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt], "%s: not dated", k)
	}
}

// createSeedNodes creates the first count nodes of the seed tenant in ns:
// be, fe1, ….
func createSeedNodes(t *testing.T, ns string, count int) {
	t.Helper()
	for _, n := range seedTenant(ns)[:count] {
		require.NoError(t, env(t).Client.Create(context.Background(), n))
	}
}
