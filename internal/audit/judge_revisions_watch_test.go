package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A template change and the StatefulSet controller's status write are two
// writes (spec, then the status subresource): the watch delivers the set
// with its new template and its old status (currentRevision =
// updateRevision = r1, observedGeneration behind) before the controller
// writes updateRevision r2. The real sequence of the existing row "a pod
// lost mid-roll just before the gate and made up just after at the roll's
// current revision is no violation", with that in-between version.
func TestAPodMadeUpAtTheCurrentRevisionIsNoViolationWhenTheWatchSawTheTemplateChangeBeforeItsStatus(t *testing.T) {
	steps := []step{node(10, false, "v1"), rolling(11, "v1", "r1", "r1"), podAt(12, "acme-fe1-0", "v1", "r1"), podAt(13, "acme-fe1-1", "v1", "r1"),
		node(20, false, "v2"),
		templateWritten(21, "v2", "r1", "r1"), // the operator's template write; status not yet observed
		rolling(22, "v2", "r1", "r2"),         // the controller's status write
		podGone(23, "acme-fe1-1"), podAt(24, "acme-fe1-1", "v2", "r2"),
		podGone(25, "acme-fe1-0"), node(26, true, "v3"), podAt(27, "acme-fe1-0", "v1", "r1")}
	assert.Empty(t, run(steps), "the StatefulSet made up a pod of v1 — what fe1 ran before the roll — at its current revision")
}

// The same through the auditor's feed: the template's write carries a
// generation its status has not observed.
func TestAPodMadeUpAtTheCurrentRevisionIsNoViolationThroughTheFeedWhenTheTemplateChangeComesBeforeItsStatus(t *testing.T) {
	a := handFedAuditor(v2alpha1.ModeEnforce)
	a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 10, false, "1", "1"), false)
	s := setObj("s1", "11", "h1")
	s.Status.CurrentRevision, s.Status.UpdateRevision = "r1", "r1"
	a.onSet(s, false, false)
	for i, name := range []string{"acme-fe1-0", "acme-fe1-1"} {
		p := podObj("p"+name, "1"+string(rune('2'+i)), "h1")
		p.Name = name
		p.Labels[appsv1.ControllerRevisionHashLabelKey] = "r1"
		a.onPodAdded(p, false)
	}
	a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 20, false, "2", "2"), false)
	spec := setObj("s1", "21", "h2") // template written, status as it was
	spec.Status.CurrentRevision, spec.Status.UpdateRevision = "r1", "r1"
	spec.Generation, spec.Status.ObservedGeneration = 2, 1
	a.onSet(spec, false, false)
	status := setObj("s1", "22", "h2")
	status.Status.CurrentRevision, status.Status.UpdateRevision = "r1", "r2"
	status.Generation, status.Status.ObservedGeneration = 2, 2
	a.onSet(status, false, false)
	assert.Empty(t, a.settleThrough(22))
	old1 := podObj("pacme-fe1-1", "23", "h1")
	old1.Name = "acme-fe1-1"
	a.onPodDeleted(old1, a.podInformer)
	new1 := podObj("q1", "24", "h2")
	new1.Name = "acme-fe1-1"
	new1.Labels[appsv1.ControllerRevisionHashLabelKey] = "r2"
	a.onPodAdded(new1, false)
	old0 := podObj("pacme-fe1-0", "25", "h1")
	a.onPodDeleted(old0, a.podInformer)
	a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 26, true, "3", "2"), false)
	madeUp := podObj("q0", "27", "h1")
	madeUp.Labels[appsv1.ControllerRevisionHashLabelKey] = "r1"
	a.onPodAdded(madeUp, false)
	assert.Empty(t, a.settleThrough(30), "a pod of 1, made up at the roll's current revision r1")
}

// The other way: the in-between version, taken as observed, tied r1 to the
// new template (v2), and the judge believed r1 made v2. v2 was superseded by v3 before any
// pod of it was made; fe1, gated for v4, ran v1 (acme-fe1-0) and v3
// (acme-fe1-1, template). An operator acting on a stale view of fe1 puts
// its template back to v2 while gated and rolls acme-fe1-1 to it: a pod
// of a target neither fe1's pods nor its template ran when the gate was
// added.
func TestAGatedNodeRolledToASupersededTargetItNeverRanIsAViolationWhateverTheWatchSawBetweenTemplateAndStatus(t *testing.T) {
	steps := []step{node(10, false, "v1"), rolling(11, "v1", "r1", "r1"), podAt(12, "acme-fe1-0", "v1", "r1"), podAt(13, "acme-fe1-1", "v1", "r1"),
		node(20, false, "v2"), templateWritten(21, "v2", "r1", "r1"), rolling(22, "v2", "r1", "r2"),
		node(25, false, "v3"), templateWritten(26, "v3", "r1", "r2"), rolling(27, "v3", "r1", "r3"),
		podGone(28, "acme-fe1-1"), podAt(29, "acme-fe1-1", "v3", "r3"),
		node(30, true, "v4"),
		rolling(31, "v2", "r1", "r2"), podGone(32, "acme-fe1-1"), podAt(33, "acme-fe1-1", "v2", "r2")}
	assert.Equal(t, []string{KindRolledWhileGated}, run(steps), "v2 never ran on fe1: rolled to it while gated for v4")
}

// The auditor starts mid-roll (fe1 released for v2, its StatefulSet at
// current r1, update r2, acme-fe1-1 rolled to v2) in the moment acme-fe1-0
// (r1, v1) is gone: evicted, not yet made up. fe1 is gated for v3; the
// StatefulSet makes acme-fe1-0 up from its current revision, v1, what fe1
// ran before the roll. The operator rolled nothing while gated.
func TestAPodMadeUpAtTheCurrentRevisionOfARollTheAuditorFoundUnderWayWithNoPodOfThatRevisionIsNoViolation(t *testing.T) {
	steps := []step{rolling(0, "v2", "r1", "r2"), podAt(0, "acme-fe1-1", "v2", "r2"),
		released(10, "u1", false, "v2", "v2"), node(30, true, "v3"), podAt(31, "acme-fe1-0", "v1", "r1")}
	assert.Empty(t, run(steps))
}
