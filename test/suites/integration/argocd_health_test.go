package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/test/framework/argocd"
)

// The Argo CD health check of config/argocd's argocd-cm, evaluated by Argo
// CD's own code, on Backends and Frontends read back from the API server in
// each state a real rollout puts them in.
func TestArgoCDHealthOfNodesInEveryState(t *testing.T) {
	health := func(ns, k string) argocd.Status {
		t.Helper()
		n := node(ns, k)
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(v2alpha1.GroupVersion.WithKind(n.NodeKind()))
		require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), u))
		s, err := argocd.Health(argocd.ConfigMap(), u)
		require.NoError(t, err)
		return s
	}
	reason := func(ns, k string) string {
		n := node(ns, k)
		if harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n) != nil || condition(n) == nil {
			return ""
		}
		return condition(n).Reason
	}
	waitReason := func(ns, k, want string) {
		t.Helper()
		require.True(t, waitFor(20*time.Second, func() bool { return reason(ns, k) == want }), "%s reaches %s; it is at %q", k, want, reason(ns, k))
	}
	type want struct{ status, message string }
	check := func(name string, got argocd.Status, w want) {
		t.Helper()
		assert.Equal(t, w.status, got.Status, "%s: %s", name, got.Message)
		assert.True(t, strings.HasPrefix(got.Message, w.message), "%s: message %q starts with %q", name, got.Message, w.message)
	}

	// The tenants left paused, stalled or in a cycle would count as waiting
	// in later tests' metrics: they go when the test ends.
	var namespaces []string
	tenant := func() string {
		ns := namespace(t)
		namespaces = append(namespaces, ns)
		return ns
	}
	t.Cleanup(func() {
		for _, ns := range namespaces {
			removeTenant(t, ns)
		}
	})

	// Before any sequencer runs: admitted and gated, no condition yet.
	fresh := tenant()
	createTenant(t, fresh, 2, nil)
	check("a node admitted before any sequencer looked at it", health(fresh, "be"), want{argocd.Progressing, "gated: waiting for express-sequencer"})

	stop := startSequencer(t, func(o *app.Options) { o.ProgressDeadline = 5 * time.Second })
	waitSettled(t, fresh, 2)
	check("a node whose rollout is complete", health(fresh, "fe1"), want{argocd.Healthy, "RolloutComplete: Ready on " + v1})

	rolling := tenant()
	stick(rolling, "be")
	createTenant(t, rolling, 2, nil)
	waitReason(rolling, "fe1", v2alpha1.ReasonWaitingForPrerequisite)
	check("a node waiting its turn", health(rolling, "fe1"), want{argocd.Progressing, "WaitingForPrerequisite: waiting for acme-be (Backend)"})
	check("a node released and rolling out", health(rolling, "be"), want{argocd.Progressing, "Released: released for provisioning"})
	waitReason(rolling, "be", v2alpha1.ReasonProgressDeadlineExceeded)
	check("a node past its progress deadline", health(rolling, "be"), want{argocd.Degraded, "ProgressDeadlineExceeded: released but not Ready"})

	// Audit mode: the sequencer says what enforcing would hold; nothing
	// holds the node.
	audited := tenant()
	tenants.SetMode(t, audited, v2alpha1.ModeAudit)
	stick(audited, "be")
	createTenant(t, audited, 2, nil)
	waitReason(audited, "fe1", v2alpha1.ReasonWouldHold)
	require.True(t, waitFor(20*time.Second, func() bool {
		return strings.Contains(health(audited, "fe1").Message, "would hold acme-fe1: waiting for acme-be (Backend)")
	}), "fe1 would wait for the backend once the changes have settled: %s", health(audited, "fe1").Message)
	check("a node audit mode would hold", health(audited, "fe1"), want{argocd.Healthy, "audit mode, nothing holds it: WouldHold: would hold acme-fe1: waiting for acme-be"})

	paused := tenant()
	createTenant(t, paused, 3, nil)
	waitSettled(t, paused, 3)
	update(t, paused, func(n v2alpha1.Node) {
		n.SetAnnotations(map[string]string{v2alpha1.AnnotationPauseRollout: "true"})
		n.NodeSpec().ExpressVersion = v2
	}, "fe1")
	setVersion(t, paused, v2, "fe2")
	waitReason(paused, "fe1", v2alpha1.ReasonRolloutPaused)
	waitReason(paused, "fe2", v2alpha1.ReasonRolloutPaused)
	check("a paused node", health(paused, "fe1"), want{argocd.Suspended, "RolloutPaused: held by " + v2alpha1.AnnotationPauseRollout})
	check("a node waiting for a paused one", health(paused, "fe2"), want{argocd.Suspended, "RolloutPaused: waiting for acme-fe1 (Frontend) which is paused"})
	setUp(t, paused, false, "be")
	waitReason(paused, "be", v2alpha1.ReasonNodeDown)
	check("an intentionally down node", health(paused, "be"), want{argocd.Healthy, "intentionally down (up: false)"})

	cycle := tenant()
	createTenant(t, cycle, 3, func(k string, s *v2alpha1.NodeSpec) {
		if k == "fe1" {
			s.DeploymentDependencies = &v2alpha1.DeploymentDependencies{ProvisioningPrerequisites: []v2alpha1.Prerequisite{{ExpressNode: "acme-fe2", Kind: v2alpha1.KindFrontend}}}
		}
		if k == "fe2" {
			s.DeploymentDependencies = &v2alpha1.DeploymentDependencies{ProvisioningPrerequisites: []v2alpha1.Prerequisite{{ExpressNode: "acme-fe9", Kind: v2alpha1.KindFrontend}}}
		}
	})
	waitReason(cycle, "fe2", v2alpha1.ReasonPrerequisiteNotFound)
	check("a node whose prerequisite does not exist", health(cycle, "fe2"), want{argocd.Degraded, "PrerequisiteNotFound: waiting for acme-fe9 (Frontend): it does not exist"})
	update(t, cycle, func(n v2alpha1.Node) { n.NodeSpec().DeploymentDependencies = nil }, "fe2") // defaulted: waits for be and fe1
	waitReason(cycle, "fe1", v2alpha1.ReasonDependencyCycle)
	check("a node in a dependency cycle", health(cycle, "fe1"), want{argocd.Degraded, "DependencyCycle: "})

	pinned := tenant()
	createTenant(t, pinned, 2, func(k string, s *v2alpha1.NodeSpec) {
		if k == "fe1" { // pins a version be's own target does not carry
			s.DeploymentDependencies = &v2alpha1.DeploymentDependencies{ProvisioningPrerequisites: []v2alpha1.Prerequisite{{ExpressNode: "acme-be", Kind: v2alpha1.KindBackend, ExpressVersion: v2}}}
		}
	})
	waitReason(pinned, "fe1", v2alpha1.ReasonPrerequisitePinUnreachable)
	check("a node whose prerequisite's pin no rollout meets", health(pinned, "fe1"), want{argocd.Degraded, "PrerequisitePinUnreachable: waiting for acme-be (Backend) to be Ready on " + v2 + "; its own target is " + v1})
	setVersion(t, pinned, v2, "be")
	waitReason(pinned, "fe1", v2alpha1.ReasonRolloutComplete)
	check("the same node once the prerequisite's version carries the pin", health(pinned, "fe1"), want{argocd.Healthy, "RolloutComplete: Ready on " + v1})

	landing := tenant()
	createTenant(t, landing, 2, nil)
	waitSettled(t, landing, 2)
	update(t, landing, func(n v2alpha1.Node) {
		n.SetAnnotations(map[string]string{v2alpha1.AnnotationRolloutID: "r1"})
	}, "be", "fe1")
	waitSettled(t, landing, 2)
	update(t, landing, func(n v2alpha1.Node) {
		n.SetAnnotations(map[string]string{v2alpha1.AnnotationRolloutID: "r2"})
		n.NodeSpec().ExpressVersion = v2
	}, "be")
	waitReason(landing, "be", v2alpha1.ReasonChangeLanding)
	check("a node whose change is still landing", health(landing, "be"), want{argocd.Progressing, "ChangeLanding: "})

	stop()
	setVersion(t, fresh, v2, "fe1")
	check("a node changed since the sequencer last reported on it", health(fresh, "fe1"), want{argocd.Progressing, "waiting for express-sequencer to look at generation"})
}

// removeTenant deletes the nodes of namespace ns and waits until they are
// gone.
func removeTenant(t *testing.T, ns string) {
	t.Helper()
	ctx := context.Background()
	for _, kind := range []string{v2alpha1.KindBackend, v2alpha1.KindFrontend} {
		assert.NoError(t, harness.Client.DeleteAllOf(ctx, v2alpha1.NewNode(kind), client.InNamespace(ns)))
	}
	assert.True(t, waitFor(30*time.Second, func() bool {
		nodes, err := controlplane.Nodes(ctx, harness.Client, ns)
		return err == nil && len(nodes) == 0
	}), "the nodes of %s are deleted", ns)
}
