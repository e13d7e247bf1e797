package integration

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/rollout"
)

func TestANewTenantIsProvisionedInOrderAndThenLeftAlone(t *testing.T) {
	startSequencer(t)
	ns := namespace(t)
	createTenant(t, ns, 5, nil)
	waitSettled(t, ns, 5)
	assert.Equal(t, "be fe1 fe2 fe3 fe4", startedSince(ns, 0))

	mark := len(startedIn(ns))
	time.Sleep(time.Second)
	assert.Equal(t, mark, len(startedIn(ns)), "a steady tenant is not rolled again")
	for _, k := range keys(5) {
		n := node(ns, k)
		require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(n), n))
		assert.False(t, v2alpha1.IsGated(n), k)
		assert.Equal(t, "Ready on "+v1+" (target "+n.GetAnnotations()[v2alpha1.AnnotationTargetHash]+")", condition(n).Message, k)
	}

	released := map[string]bool{}
	waitFor(10*time.Second, func() bool { // Events are recorded asynchronously
		var events eventsv1.EventList
		if harness.Client.List(context.Background(), &events, client.InNamespace(ns)) != nil {
			return false
		}
		for _, e := range events.Items {
			if e.Reason == v2alpha1.ReasonReleased && e.Action == "Release" {
				released[e.Regarding.Name] = true
			}
		}
		return len(released) == 5
	})
	assert.Len(t, released, 5, "every release is recorded as an Event: %v", released)
}

func TestAChangeToAllNodesRollsFe1Fe2ThenTheBackend(t *testing.T) {
	startSequencer(t)
	ns, mark := settledTenant(t, 5)

	stick(ns, "fe1") // fe1 is not Ready until fe2 is looked at, however slow the look
	setVersion(t, ns, v2, keys(5)...)
	require.True(t, waitFor(10*time.Second, func() bool { return startedSince(ns, mark) != "" }))
	fe2 := node(ns, "fe2")
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(fe2), fe2))
	assert.True(t, v2alpha1.IsGated(fe2))
	assert.Equal(t, v2alpha1.ReasonWaitingForPrerequisite, condition(fe2).Reason)
	assert.Contains(t, condition(fe2).Message, "waiting for acme-fe1 (Frontend)")
	unstick(t, ns, "fe1")

	waitSettled(t, ns, 5)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", startedSince(ns, mark))
}

func TestExplicitDependenciesOverrideTheDefaultOrder(t *testing.T) {
	startSequencer(t)
	ns := namespace(t)
	// Upgrade in reverse: fe4 first, the backend last.
	createTenant(t, ns, 5, func(k string, s *v2alpha1.NodeSpec) {
		next := map[string]string{"be": "fe1", "fe1": "fe2", "fe2": "fe3", "fe3": "fe4"}[k]
		upg := []v2alpha1.Prerequisite{}
		if next != "" {
			kind := v2alpha1.KindFrontend
			upg = append(upg, v2alpha1.Prerequisite{ExpressNode: "acme-" + next, Kind: kind, PodConditionType: "Ready", ConditionStatus: "True"})
		}
		s.DeploymentDependencies = &v2alpha1.DeploymentDependencies{UpgradePrerequisites: upg}
	})
	waitSettled(t, ns, 5)
	assert.Equal(t, "be fe1 fe2 fe3 fe4", startedSince(ns, 0), "provisioning still follows the defaults")
	mark := len(startedIn(ns))
	setVersion(t, ns, v2, keys(5)...)
	waitSettled(t, ns, 5)
	assert.Equal(t, "fe4 fe3 fe2 fe1 be", startedSince(ns, mark))
}

func TestANodeToggledDownAndUpMidRolloutIsReordered(t *testing.T) {
	startSequencer(t)
	ns, mark := settledTenant(t, 5)
	stick(ns, "fe1") // fe1 is not Ready, and fe2 not released, until fe2 is down
	setVersion(t, ns, v2, keys(5)...)
	require.True(t, waitFor(10*time.Second, func() bool { return startedSince(ns, mark) != "" }))
	setUp(t, ns, false, "fe2")
	unstick(t, ns, "fe1")
	waitSettled(t, ns, 5)
	assert.Equal(t, "fe1 be fe3 fe4", startedSince(ns, mark), "be follows fe1 once fe2 is down")
	setUp(t, ns, true, "fe2")
	waitSettled(t, ns, 5)
	assert.Equal(t, "fe1 be fe3 fe4 fe2", startedSince(ns, mark))
}

func TestAStalledNodeIsReportedAndHoldsItsDependents(t *testing.T) {
	startSequencer(t, func(o *app.Options) { o.ProgressDeadline = 2 * time.Second })
	ns := namespace(t)
	createTenant(t, ns, 3, nil)
	waitSettled(t, ns, 3)
	stick(ns, "fe1")
	setVersion(t, ns, v2, keys(3)...)

	fe1 := node(ns, "fe1")
	require.True(t, waitFor(20*time.Second, func() bool {
		return harness.Client.Get(context.Background(), client.ObjectKeyFromObject(fe1), fe1) == nil &&
			condition(fe1) != nil && condition(fe1).Reason == v2alpha1.ReasonProgressDeadlineExceeded
	}), "fe1 is reported stalled")
	assert.Contains(t, condition(fe1).Message, "released but not Ready on "+v2+" (target "+fe1.GetAnnotations()[v2alpha1.AnnotationTargetHash]+") within 2s")
	assert.False(t, v2alpha1.IsGated(fe1), "nothing is reverted")
	fe2 := node(ns, "fe2")
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(fe2), fe2))
	assert.True(t, v2alpha1.IsGated(fe2), "its dependents stay gated")

	assert.True(t, waitFor(10*time.Second, func() bool { // Events are recorded asynchronously
		var events eventsv1.EventList
		return harness.Client.List(context.Background(), &events, client.InNamespace(ns)) == nil &&
			slices.ContainsFunc(events.Items, func(e eventsv1.Event) bool {
				return e.Reason == v2alpha1.ReasonProgressDeadlineExceeded && e.Type == "Warning" && e.Regarding.Name == "acme-fe1"
			})
	}), "a Warning Event says so")
}

// A Frontend with the Backend's name (a typo'd kind; the validating
// webhook warns that its name fits no node key) is not the Backend: fe1
// waits for a Backend that does not exist, and says a Frontend has its
// name, where it used to take the Frontend for it and start.
func TestAFrontendNamedLikeTheBackendIsNotTheBackend(t *testing.T) {
	startSequencer(t)
	ns := namespace(t)
	// fe1 first: its default prerequisites name Backend acme-be, which
	// the validating webhook refuses once a Frontend has that name.
	for _, name := range []string{"acme-fe1", "acme-be"} {
		fe := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		fe.Spec.ClusterConfig = v2alpha1.ClusterConfig{ClusterName: "acme", TenantID: "123634", TenantName: "acme"}
		fe.Spec.ExpressVersion = v1
		require.NoError(t, harness.Client.Create(context.Background(), fe))
	}

	fe1 := node(ns, "fe1")
	require.True(t, waitFor(30*time.Second, func() bool {
		if err := harness.Client.Get(context.Background(), client.ObjectKeyFromObject(fe1), fe1); err != nil {
			return false
		}
		c := condition(fe1)
		return c != nil && strings.Contains(c.Message, "a Frontend has its name")
	}), "fe1 waits for the Backend, a Frontend having its name: %v", condition(fe1))
	assert.Equal(t, v2alpha1.ReasonPrerequisiteNotFound, condition(fe1).Reason)
	assert.Contains(t, condition(fe1).Message, "waiting for acme-be (Backend): it does not exist, a Frontend has its name")
	assert.True(t, rollout.Gated(fe1), "fe1 stays gated")
	assert.NotContains(t, startedIn(ns), "fe1", "no pod of fe1 started")
}

// A node deleted and a change applied just after it (kubectl delete fe2,
// then kubectl edit fe1 a second later, on a tenant without rollout-id)
// are ordered as one change: the deletion frees be, which waited for fe2,
// but be waits the settle time after the deletion (dated by the webhook
// on the nodes that stay), and so goes after fe1's new version, as it
// would had both landed at once. Without the date, be went the moment fe2
// was gone, ahead of fe1's change.
func TestANodeDeletedAndAChangeAppliedJustAfterAreOrderedAsOne(t *testing.T) {
	const v3 = "express-e689.160"
	startSequencer(t, func(o *app.Options) { o.Grouping.SettleTime = 5 * time.Second })
	ns, mark := settledTenant(t, 4) // upgrades fe1, fe2, be, fe3
	stick(ns, "fe2")
	setVersion(t, ns, v2, keys(4)...)
	be := node(ns, "be")
	require.True(t, waitFor(30*time.Second, func() bool {
		return startedSince(ns, mark) == "fe1 fe2" && harness.Client.Get(context.Background(), client.ObjectKeyFromObject(be), be) == nil &&
			condition(be) != nil && condition(be).Reason == v2alpha1.ReasonWaitingForPrerequisite
	}), "be waits for fe2, stuck: %s", startedSince(ns, mark))

	require.NoError(t, harness.Client.Delete(context.Background(), node(ns, "fe2")))
	time.Sleep(time.Second)
	setVersion(t, ns, v3, "fe1")
	require.True(t, waitFor(60*time.Second, func() bool { return strings.HasSuffix(startedSince(ns, mark), "fe3") }),
		"fe3 rolls last: %s", startedSince(ns, mark))
	assert.Equal(t, "fe1 fe2 fe1 be fe3", startedSince(ns, mark), "fe1's new version before be, as if the deletion and the edit had landed at once")
	if starts := started(ns)[mark:]; assert.Len(t, starts, 5) {
		assert.Equal(t, v3, starts[2].Version, "fe1's second start is its new version")
	}
}

// A departure dated by a webhook replica whose clock ran a day ahead would
// hold its tenant for that day: only a later date replaces one. The
// sequencer dates it again at its own now, and a change applied then
// rolls after the settle time, in order.
func TestADepartureDatedADayAheadHoldsItsTenantOnlyForTheSettleTime(t *testing.T) {
	startSequencer(t)
	ns, mark := settledTenant(t, 3)
	ahead := time.Now().Add(24 * time.Hour).UTC().Format(time.RFC3339Nano)
	patch := []byte(`{"metadata":{"annotations":{"` + v2alpha1.AnnotationNodeLeftTenantAt + `":"` + ahead + `"}}}`)
	// As the sequencer, as a replica whose clock ran ahead writes it.
	require.NoError(t, harness.Client.Patch(context.Background(), node(ns, "fe1"), client.RawPatch(types.MergePatchType, patch), client.FieldOwner(v2alpha1.FieldManager)))
	setVersion(t, ns, v2, keys(3)...)
	require.True(t, waitFor(30*time.Second, func() bool { return startedSince(ns, mark) == "fe1 fe2 be" }),
		"the change rolls, not held for a day: %s", startedSince(ns, mark))
	fe1 := node(ns, "fe1")
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(fe1), fe1))
	assert.True(t, rollout.NodeLeftTenantAt(fe1).Before(time.Now()), "dated again at the sequencer's now: %s", fe1.GetAnnotations()[v2alpha1.AnnotationNodeLeftTenantAt])
}
