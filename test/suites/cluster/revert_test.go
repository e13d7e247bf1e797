package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// A release the Express operator has not carried out yet can be overtaken:
// the node is gated again for another change before the operator acts (it
// is slow, restarting, or — as here — held by another system's rollout
// gate, which DESIGN §2 tells it to obey). When the node's target then
// comes back to the one released (a change reverted and applied again, as
// an Argo CD rollback and roll-forward do), its pods still run the older
// target: releasing it upgrades them, and it must wait its turn in the
// upgrade order like any other change.

// otherGate is a rollout gate of another system, which holds the Express
// operator on a node as the sequencer's own gate does.
const otherGate = "example.com/change-freeze"

// readyOnAt reports whether node (its name) had, at instant at, at least
// one pod Ready and not Terminating, and every such pod on version, by the
// pod log.
func readyOnAt(events []controlplane.PodEvent, node, version string, at time.Time) bool {
	ready := readyPodsAt(events, node, at)
	for _, v := range ready {
		if v != version {
			return false
		}
	}
	return len(ready) > 0
}

// firstStartOn returns when node's first pod on version was bound to a
// machine since mark, zero if none was.
func firstStartOn(events []controlplane.PodEvent, node, version string, mark time.Time) time.Time {
	for _, e := range events {
		if e.Node == node && e.Version == version && !e.Ready && !e.Terminating && e.At.After(mark) {
			return e.At
		}
	}
	return time.Time{}
}

// withAnnotation sets annotation key to value on a node, or removes it
// when value is empty.
func withAnnotation(key, value string) func(v2alpha1.Node) {
	return func(n v2alpha1.Node) {
		ann := n.GetAnnotations()
		if value == "" {
			delete(ann, key)
		} else {
			if ann == nil {
				ann = map[string]string{}
			}
			ann[key] = value
		}
		n.SetAnnotations(ann)
	}
}

// The Backend's release for v2 is overtaken by a revert to v1 before its
// operator acts, and v2 is then applied to all again: be, still running
// v1, starts v2 only once fe1 and fe2 — before it in the upgrade order —
// are Ready on v2. Its target equals the target released before, which
// read as "the target it runs" and let it go at once.
func TestARevertedChangeAppliedAgainWaitsForTheUpgradeOrderWhereItsReleaseWasNeverCarriedOut(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	replicas.set(ns, 1)
	grace.set(ns, 3*time.Second) // the revert finds fe2 still rolling
	createNodes(t, ns, 4)
	waitSettled(t, ns)
	update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().AddGate(otherGate) }, "be")

	// v2 to all: fe1 and fe2 roll, be is released; its operator waits.
	setVersion(t, ns, v2, keys(4)...)
	be := waitReleased(t, ns, "be")
	require.Equal(t, be.GetAnnotations()[v2alpha1.AnnotationTargetHash], be.GetAnnotations()[v2alpha1.AnnotationReleasedTarget], "be released for v2")
	require.True(t, readyOnAt(pods.Since(ns, time.Time{}), "acme-be", v1, time.Now()), "be still runs v1")

	// Reverted: fe1 rolls back, be is gated for v1 behind it.
	setVersion(t, ns, v1, keys(4)...)
	require.True(t, waitFor(time.Minute, func() bool { return readyOnAt(pods.Since(ns, time.Time{}), "acme-fe1", v1, time.Now()) }), "fe1 back on v1")
	require.NoError(t, harness.Client.Get(ctx, client.ObjectKeyFromObject(be), be))
	require.True(t, be.NodeSpec().HasGate(v2alpha1.GateSequencer), "be gated for the revert, not released for it")

	// v2 to all again; be's operator acts as soon as be is released.
	mark := time.Now()
	setVersion(t, ns, v2, keys(4)...)
	waitReleased(t, ns, "be")
	update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().RemoveGate(otherGate) }, "be")
	waitSettled(t, ns)

	events := pods.Since(ns, time.Time{})
	started := firstStartOn(events, "acme-be", v2, mark)
	require.False(t, started.IsZero(), "be started on v2; starts since the change: %s", starts(ns, mark))
	assert.True(t, readyOnAt(events, "acme-fe1", v2, started), "fe1 Ready on v2 when be started on v2 (%s); starts: %s", started.Format(time.StampMilli), starts(ns, mark))
	assert.True(t, readyOnAt(events, "acme-fe2", v2, started), "fe2 Ready on v2 when be started on v2 (%s); starts: %s", started.Format(time.StampMilli), starts(ns, mark))
}

// The same on a Frontend, against a pause: fe2's release for v2 is
// overtaken by a revert (fe2 paused meanwhile), and v2 is applied again with
// fe1 paused and fe2's pause lifted. fe2 still runs v1, so it waits for
// fe1 — first in the upgrade order, paused on v1 — and starts v2 only once
// fe1 is resumed and Ready on v2.
func TestAFrontendWhoseReleaseWasOvertakenWaitsForAPausedPredecessor(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	replicas.set(ns, 1)
	createNodes(t, ns, 4)
	waitSettled(t, ns)
	update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().AddGate(otherGate) }, "fe2")

	setVersion(t, ns, v2, keys(4)...)
	waitReleased(t, ns, "fe2")
	require.True(t, readyOnAt(pods.Since(ns, time.Time{}), "acme-fe2", v1, time.Now()), "fe2 still runs v1")

	update(t, ns, withAnnotation(v2alpha1.AnnotationPauseRollout, "true"), "fe2")
	setVersion(t, ns, v1, keys(4)...)
	require.True(t, waitFor(time.Minute, func() bool { return readyOnAt(pods.Since(ns, time.Time{}), "acme-fe1", v1, time.Now()) }), "fe1 back on v1")

	mark := time.Now()
	update(t, ns, func(n v2alpha1.Node) {
		n.NodeSpec().ExpressVersion = v2
		withAnnotation(v2alpha1.AnnotationPauseRollout, "true")(n)
	}, "fe1")
	update(t, ns, func(n v2alpha1.Node) {
		n.NodeSpec().ExpressVersion = v2
		withAnnotation(v2alpha1.AnnotationPauseRollout, "")(n)
	}, "fe2")
	setVersion(t, ns, v2, "be", "fe3")
	fe2 := node(ns, "fe2")
	require.True(t, waitFor(30*time.Second, func() bool {
		return harness.Client.Get(ctx, client.ObjectKeyFromObject(fe2), fe2) == nil &&
			fe2.NodeSpec().HasGate(v2alpha1.GateSequencer) && condition(fe2) != nil && condition(fe2).Reason == v2alpha1.ReasonRolloutPaused &&
			strings.Contains(condition(fe2).Message, "waiting for acme-fe1")
	}), "fe2 held for its paused upgrade predecessor: %v", condition(fe2))

	update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().RemoveGate(otherGate) }, "fe2")
	update(t, ns, withAnnotation(v2alpha1.AnnotationPauseRollout, ""), "fe1")
	waitSettled(t, ns)

	events := pods.Since(ns, time.Time{})
	started := firstStartOn(events, "acme-fe2", v2, mark)
	require.False(t, started.IsZero(), "fe2 started on v2; starts since the change: %s", starts(ns, mark))
	assert.True(t, readyOnAt(events, "acme-fe1", v2, started), "fe1 Ready on v2 when fe2 started on v2 (%s); starts: %s", started.Format(time.StampMilli), starts(ns, mark))
}

// createOldChart creates be, fe1…fe(size-1) at v1 in ns with the explicit
// lists the old chart rendered from allNodeConfig: provisioning fe1→be,
// feK→fe(K-1); upgrade fe2→fe1, be→fe2, fe3→be, feK→fe(K-1).
func createOldChart(t *testing.T, ns string, size int) {
	t.Helper()
	prereq := func(k string) []v2alpha1.Prerequisite {
		kind := v2alpha1.KindFrontend
		if k == "be" {
			kind = v2alpha1.KindBackend
		}
		return []v2alpha1.Prerequisite{{ExpressNode: "acme-" + k, Kind: kind, PodConditionType: "Ready", ConditionStatus: "True"}}
	}
	upgrade := map[string]string{"fe2": "fe1", "be": "fe2", "fe3": "be"}
	for i, k := range keys(size) {
		deps := &v2alpha1.DeploymentDependencies{ProvisioningPrerequisites: []v2alpha1.Prerequisite{}, UpgradePrerequisites: []v2alpha1.Prerequisite{}}
		if i > 0 {
			deps.ProvisioningPrerequisites = prereq(key(i - 1))
		}
		switch {
		case upgrade[k] != "":
			deps.UpgradePrerequisites = prereq(upgrade[k])
		case i > 3:
			deps.UpgradePrerequisites = prereq(key(i - 1))
		}
		nd := node(ns, k)
		*nd.NodeSpec() = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "acme", TenantID: "1", TenantName: "acme"}, ExpressVersion: v1, DeploymentDependencies: deps}
		require.NoError(t, harness.Client.Create(context.Background(), nd))
	}
}

// On the old chart's lists (fe3 provisioning after fe2 alone, upgrading
// after be), fe3's release for v2 is overtaken before its operator acts
// (another system's gate), and the rollback to v1 also takes fe3 down: its
// operator scales its StatefulSet to 0, its template still on v1. The
// roll-forward to v2 brings fe3 back up with the target it was released
// for, which it never ran: it is an upgrade, and starts v2 only once be
// is Ready on v2 — not by its provisioning list, beside fe1.
func TestAnOvertakenReleaseTakenDownComesBackInItsUpgradeTurn(t *testing.T) {
	ctx := context.Background()
	ns := namespace(t)
	replicas.set(ns, 1)
	createOldChart(t, ns, 4)
	waitSettled(t, ns)
	update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().AddGate(otherGate) }, "fe3")

	setVersion(t, ns, v2, keys(4)...)
	waitReleased(t, ns, "fe3")
	require.True(t, readyOnAt(pods.Since(ns, time.Time{}), "acme-fe3", v1, time.Now()), "fe3 still runs v1")

	// Rolled back, fe3 taken down in the same write.
	update(t, ns, func(n v2alpha1.Node) {
		n.NodeSpec().ExpressVersion = v1
		if n.GetName() == "acme-fe3" {
			n.NodeSpec().Up = ptr.To(false)
		}
	}, keys(4)...)
	waitSettled(t, ns)
	update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().RemoveGate(otherGate) }, "fe3")

	// Rolled forward, fe3 brought back up in the same write, watched by the
	// black-box oracle.
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	log := watchOrder(watchCtx, t, ns)
	mark := time.Now()
	update(t, ns, func(n v2alpha1.Node) { n.NodeSpec().ExpressVersion = v2; n.NodeSpec().Up = nil }, keys(4)...)
	waitSettled(t, ns)
	fe3 := node(ns, "fe3")
	require.NoError(t, harness.Client.Get(ctx, client.ObjectKeyFromObject(fe3), fe3))

	events := pods.Since(ns, time.Time{})
	started := firstStartOn(events, "acme-fe3", v2, mark)
	require.False(t, started.IsZero(), "fe3 started on v2; starts since the change: %s", starts(ns, mark))
	assert.True(t, readyOnAt(events, "acme-be", v2, started), "be Ready on v2 when fe3 started on v2 (%s); starts: %s", started.Format(time.StampMilli), starts(ns, mark))
	assert.Equal(t, "fe1 fe2 be fe3", starts(ns, mark))
	checkOrder(t, log.snapshot(), mark, 1)
}
