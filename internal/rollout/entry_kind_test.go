package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// fe1's explicit list names a Backend acme-web, which did not exist when
// the entry was admitted (the webhook only warns then). A Frontend
// acme-web was made since, Ready: it is not the node the entry lists, and
// the entry waits, as for any node that does not exist
// (PrerequisiteNotFound), saying which node has the name.
func TestAnEntryNamingANodeOfAnotherKindWaitsAsForANodeThatDoesNotExist(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	entry := v2alpha1.Prerequisite{ExpressNode: "acme-web", Kind: v2alpha1.KindBackend, PodConditionType: "Ready", ConditionStatus: "True"}
	read := func(kind string, changed bool) Objects {
		be := orphanTestNode(v2alpha1.KindBackend, "acme-be", now.Add(-3*time.Hour))
		web := orphanTestNode(kind, "acme-web", now.Add(-2*time.Hour))
		webSet := orphanTestSet("acme-web", web)
		read := fe1RecoveringRead(now, be,
			orphanTestPod("acme-be-0", "acme-be", "hash-acme-be", now.Add(-time.Hour), true, nil),
			orphanTestPod("acme-web-0", "acme-web", "hash-acme-web", now.Add(-time.Hour), true, setOwner(webSet.Name, webSet.UID)))
		read.Nodes = append(read.Nodes, web)
		read.StatefulSets = append(read.StatefulSets, webSet)
		fe1 := read.Nodes[1]
		fe1.NodeSpec().DeploymentDependencies.ProvisioningPrerequisites = []v2alpha1.Prerequisite{entry}
		fe1.NodeSpec().DeploymentDependencies.UpgradePrerequisites = []v2alpha1.Prerequisite{entry}
		if changed {
			// A new target, gated, its pod of the old target Ready.
			setAnnotation(fe1, v2alpha1.AnnotationTargetHash, "hash-acme-fe1-new")
			fe1.NodeSpec().AddGate(v2alpha1.GateSequencer)
			read.Pods[len(read.Pods)-1].Spec.SchedulingGates = nil
			read.Pods[len(read.Pods)-1].Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
		}
		require.False(t, defaults.IsDefaulted(fe1, defaults.ProvisioningList), "fe1's list is its own")
		return read
	}
	for _, tc := range []struct {
		name string
		kind string
		held bool
	}{
		{name: "a Frontend of the name listed as a Backend holds fe1", kind: v2alpha1.KindFrontend, held: true},
		{name: "the Backend listed, Ready, lets fe1 go (the control)", kind: v2alpha1.KindBackend},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := SnapshotOf(read(tc.kind, false), orphanTenant, defaults.Builtin(), now)
			ok, why := PodsMayStart(s, "acme-fe1")
			assert.Equal(t, !tc.held, ok, "fe1's recovering pod: %s", why)
			assert.Equal(t, !tc.held, releasesPod(Plan(s), "acme-fe1-0"), "the plan, of fe1's recovering pod")

			s = SnapshotOf(read(tc.kind, true), orphanTenant, defaults.Builtin(), now)
			ok, why = ReleaseStands(s, "acme-fe1", "")
			assert.Equal(t, !tc.held, ok, "the release of fe1's new target: %s", why)
			d := decisionOf(t, Plan(s), "acme-fe1")
			assert.Equal(t, tc.held, d.Gated, "the plan, of fe1's new target")
			if tc.held {
				assert.Equal(t, v2alpha1.ReasonPrerequisiteNotFound, d.Condition.Reason)
				assert.Contains(t, d.Condition.Message, "waiting for acme-web (Backend): it does not exist, a Frontend has its name")
			}
		})
	}
}

// fe1's entry names the tenant's Backend, acme-be, as it should; no
// Backend acme-be exists, and a Frontend has its name. The entry is right:
// fe1 waits, saying the Frontend is to go, not that the entry is to be
// corrected.
func TestAnEntryNamingTheTenantsBackendWhoseNameAFrontendTookSaysTheFrontendIsToGo(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	impostor := orphanTestNode(v2alpha1.KindFrontend, "acme-be", now.Add(-3*time.Hour))
	read := fe1RecoveringRead(now, impostor, orphanTestPod("acme-be-0", "acme-be", "hash-acme-be", now.Add(-time.Hour), true, nil))
	// Its own list, not the default: it asks ContainersReady.
	read.Nodes[1].NodeSpec().DeploymentDependencies.ProvisioningPrerequisites = []v2alpha1.Prerequisite{
		{ExpressNode: "acme-be", Kind: v2alpha1.KindBackend, PodConditionType: string(corev1.ContainersReady), ConditionStatus: "True"},
	}
	require.False(t, defaults.IsDefaulted(read.Nodes[1], defaults.ProvisioningList), "fe1's list is its own")
	s := SnapshotOf(read, orphanTenant, defaults.Builtin(), now)
	ok, why := PodsMayStart(s, "acme-fe1")
	assert.False(t, ok, "fe1's recovering pod waits for a Backend: %s", why)
	assert.Contains(t, why, "no Frontend may take the Backend's name")
	assert.NotContains(t, why, "correct its kind")
}

// fe1's entry names Backend acme-x; a Backend and a Frontend are both
// called acme-x (two created at once can both pass the webhook), the
// Frontend down. Neither can be told to be the one listed, and a pod
// labelled acme-x counts for neither: fe1 waits, saying the name is
// shared, and is not walked through the down Frontend to what it waits
// for (be, Ready).
func TestAnEntryNamingANameABackendAndAFrontendShareIsNeverMet(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	be := orphanTestNode(v2alpha1.KindBackend, "acme-be", now.Add(-3*time.Hour))
	read := fe1RecoveringRead(now, be, orphanTestPod("acme-be-0", "acme-be", "hash-acme-be", now.Add(-time.Hour), true, nil),
		orphanTestPod("acme-x-0", "acme-x", "hash-acme-x", now.Add(-time.Hour), true, nil))
	x := orphanTestNode(v2alpha1.KindBackend, "acme-x", now.Add(-2*time.Hour))
	xf := orphanTestNode(v2alpha1.KindFrontend, "acme-x", now.Add(-2*time.Hour))
	xf.NodeSpec().Up = ptr.To(false)
	read.Nodes = append(read.Nodes, x, xf)
	read.Nodes[1].NodeSpec().DeploymentDependencies.ProvisioningPrerequisites = []v2alpha1.Prerequisite{
		{ExpressNode: "acme-x", Kind: v2alpha1.KindBackend, PodConditionType: "Ready", ConditionStatus: "True"},
	}
	s := SnapshotOf(read, orphanTenant, defaults.Builtin(), now)
	require.True(t, s.SharedNames["acme-x"], "acme-x is shared")
	ok, why := PodsMayStart(s, "acme-fe1")
	assert.False(t, ok, "fe1's recovering pod: %s", why)
	assert.Contains(t, why, "waiting for acme-x (Backend): a Backend and a Frontend of the namespace are both called acme-x")
	assert.False(t, releasesPod(Plan(s), "acme-fe1-0"), "the plan holds fe1's recovering pod")
}

// be's explicit upgrade list names fe2; fe2's explicit provisioning entry
// names t-be, and be crashes during a change to all. Where the entry names
// the Backend, be and fe2 wait for each other and the provisioning order
// wins: be goes first. Where it names a Frontend t-be, which does not
// exist (or a node fe9 that does not), fe2 waits for no state of be: no
// loop, and be waits for fe2 on target.
func TestAnEntryNamingANodeThatDoesNotExistMakesNoLoopThroughANodeOfItsName(t *testing.T) {
	for _, tc := range []struct {
		name        string
		entry, kind string
		beGated     bool
	}{
		{name: "an entry naming the Backend makes a loop the provisioning order breaks", entry: "t-be", kind: v2alpha1.KindBackend},
		{name: "an entry naming a Frontend of the Backend's name makes none", entry: "t-be", kind: v2alpha1.KindFrontend, beGated: true},
		{name: "an entry naming a node that does not exist makes none", entry: "t-fe9", kind: v2alpha1.KindFrontend, beGated: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t, "t")
			w.tenant(3, v1)
			w.run(200)
			w.update("be", func(n v2alpha1.Node) {
				n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{ProvisioningPrerequisites: []v2alpha1.Prerequisite{},
					UpgradePrerequisites: []v2alpha1.Prerequisite{{ExpressNode: "t-fe2", Kind: v2alpha1.KindFrontend, PodConditionType: "Ready", ConditionStatus: "True"}}}
			})
			w.update("fe2", func(n v2alpha1.Node) {
				n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{
					ProvisioningPrerequisites: []v2alpha1.Prerequisite{{ExpressNode: tc.entry, Kind: tc.kind, PodConditionType: "Ready", ConditionStatus: "True"}},
					UpgradePrerequisites:      []v2alpha1.Prerequisite{}}
			})
			w.run(200)
			w.setVersion("v9", "be", "fe1", "fe2")
			w.crash("be")
			d := decisionOf(t, Plan(w.snapshot()), "t-be")
			assert.Equal(t, tc.beGated, d.Gated, "be: %s", d.Condition.Message)
		})
	}
}
