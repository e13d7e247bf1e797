package webhook_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A node being deleted loses its finalizers (the Express operator's)
// whatever its spec. Here a prerequisite that was valid when admitted (a
// warning: "does not exist yet") turned invalid once a node of that name but
// another kind was created: no update of a node being deleted is denied, or
// its delete would hang.
func TestANodeBeingDeletedLosesItsFinalizerWhateverItsPrerequisites(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)

	fe3 := listingANodeCreatedSinceAsABackend(t, ns, "express.medallia.com/operator")

	require.NoError(t, c.Delete(ctx, fe3))
	deleting := get(t, fe3)
	require.NotNil(t, deleting.GetDeletionTimestamp())
	inCache(t, deleting)
	deleting.SetFinalizers(nil)
	assert.NoError(t, c.Update(ctx, deleting), "removing the last finalizer of a node being deleted must not be denied for its prerequisites")
}

// A node whose list another node's create made invalid keeps taking the
// updates that leave its lists alone (labels, the operator's finalizers),
// with a warning that says what is wrong; an update that touches a list is
// checked in full and denied, naming the fields.
func TestAnUpdateThatLeavesTheListsAloneIsAdmittedWhateverOtherNodesMadeOfThem(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)

	fe3 := listingANodeCreatedSinceAsABackend(t, ns)

	stored := get(t, fe3)
	stored.SetLabels(map[string]string{"team": "express"})
	wc, w := warningClient(t)
	require.NoError(t, wc.Update(ctx, stored), "a label is no error of its own")
	assert.Contains(t, strings.Join(w.all(), "\n"), "acme-extra is a Backend, not a Frontend", "the error it already had, as a warning")
	assert.Equal(t, "express", get(t, fe3).GetLabels()["team"])

	stored = get(t, fe3)
	stored.NodeSpec().DeploymentDependencies.UpgradePrerequisites = []v2alpha1.Prerequisite{ready("acme-fe3", "Frontend")}
	err := c.Update(ctx, stored)
	require.Error(t, err, "its own new error is denied")
	assert.Contains(t, err.Error(), "spec.deploymentDependencies.upgradePrerequisites[0].expressNode")
	assert.Contains(t, err.Error(), "acme-fe3 cannot be its own prerequisite")
	assert.Contains(t, err.Error(), "acme-extra is a Backend, not a Frontend", "and the error it already had")
}

// An error a node already has does not let an update of its lists through:
// Check stops at field errors before it looks for a cycle, so an update
// that kept the old error and closed a cycle would be stored, and the cycle
// would stay once the other node went.
func TestAnErrorANodeAlreadyHasDoesNotLetAnUpdateOfItsListsCloseACycle(t *testing.T) {
	ctx := context.Background()
	c := env(t).Client
	ns := namespace(t)
	fe3 := listingANodeCreatedSinceAsABackend(t, ns)
	fe2 := withLists(seedNode(ns, "fe2"), []v2alpha1.Prerequisite{}, []v2alpha1.Prerequisite{ready("acme-fe3", "Frontend")})
	require.NoError(t, c.Create(ctx, fe2))
	inCache(t, fe2)

	stored := get(t, fe3)
	stored.NodeSpec().DeploymentDependencies.UpgradePrerequisites = []v2alpha1.Prerequisite{ready("acme-fe2", "Frontend")}
	err := c.Update(ctx, stored)
	require.Error(t, err, "acme-fe3 → acme-fe2 → acme-fe3 would be a cycle")
	assert.Contains(t, err.Error(), "acme-extra is a Backend, not a Frontend", "denied for the list's errors, fixed first")
	assert.Empty(t, get(t, fe3).NodeSpec().DeploymentDependencies.UpgradePrerequisites, "nothing stored")
}

// listingANodeCreatedSinceAsABackend creates acme-fe3 (with finalizers)
// waiting for Frontend acme-extra, which does not exist yet (a warning),
// and then a Backend acme-extra (a name that fits no key: a warning too):
// fe3's list is now invalid through no update of its own.
func listingANodeCreatedSinceAsABackend(t *testing.T, ns string, finalizers ...string) v2alpha1.Node {
	t.Helper()
	ctx, c := context.Background(), env(t).Client
	fe3 := withLists(seedNode(ns, "fe3"), []v2alpha1.Prerequisite{ready("acme-extra", "Frontend")}, []v2alpha1.Prerequisite{})
	fe3.SetFinalizers(finalizers)
	require.NoError(t, c.Create(ctx, fe3))
	inCache(t, fe3)
	extra := seedNode(ns, "be")
	extra.SetName("acme-extra")
	require.NoError(t, c.Create(ctx, extra))
	inCache(t, extra)
	return fe3
}
