package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// run feeds steps, settling after each, and returns the kinds found.
func run(steps []step) []string {
	j := NewJudge()
	var got []string
	for _, s := range steps {
		s(j)
		for _, f := range j.Settle(everything) {
			got = append(got, f.Kind)
		}
	}
	return got
}

// stalledRollThenGatedForV3 is fe1 running v1 on two pods, released for
// v2, its roll stalled after one pod (current r1, update r2: the pod of v2
// fails), then gated for v3 at 30.
func stalledRollThenGatedForV3() []step {
	return []step{node(10, false, "v1"), rolling(11, "v1", "r1", "r1"), podAt(12, "acme-fe1-0", "v1", "r1"), podAt(13, "acme-fe1-1", "v1", "r1"),
		node(20, false, "v2"), rolling(21, "v2", "r1", "r2"), podGone(22, "acme-fe1-1"), podAt(23, "acme-fe1-1", "v2", "r2"),
		node(30, true, "v3")}
}

// A pod made by hand while fe1 is gated for v3 — a copy of acme-fe1-0's
// manifest (`kubectl get pod -o yaml`), renamed and relabelled for v3,
// keeping its ownerReferences and controller-revision-hash — runs v3,
// which neither fe1's pods nor its template ran when the gate was added.
// The judge took it for the StatefulSet making up a lost pod of the roll's
// current revision, from its revision label alone, without asking whether
// the pod's target is that revision's.
func TestAPodMadeByHandForANewTargetWhileGatedIsAViolationWhateverRevisionLabelItCopied(t *testing.T) {
	steps := append(stalledRollThenGatedForV3(), func(j *Judge) {
		j.PodCreated(31, PodSeen{Node: fe1, Name: "acme-fe1-debug", Target: "v3", FromSet: true, Set: "acme-fe1", Revision: "r1", Created: at(0)})
	})
	assert.Len(t, run(steps), 1, "a pod of v3 made while gated for v3 since 30, v3 never run")
}

// The same through the auditor's feed: the copied pod carries the
// StatefulSet's controller reference and the current revision's hash.
func TestAPodCopiedFromAStatefulSetsPodAndRelabelledForTheGatedTargetIsCounted(t *testing.T) {
	a := handFedAuditor(v2alpha1.ModeEnforce)
	s := setObj("s1", "5", "h1")
	s.Status.CurrentRevision, s.Status.UpdateRevision = "r1", "r1"
	a.onSet(s, true, false)
	p0 := podObj("p0", "6", "h1")
	p0.Labels[appsv1.ControllerRevisionHashLabelKey] = "r1"
	a.onPodAdded(p0, true)
	a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 10, false, "1", "1"), false)
	a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 20, false, "2", "2"), false)
	s2 := setObj("s1", "21", "h2") // released for 2: the roll stalls (its first pod of 2 fails)
	s2.Status.CurrentRevision, s2.Status.UpdateRevision = "r1", "r2"
	a.onSet(s2, false, false)
	a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 30, true, "3", "2"), false)
	copied := p0.DeepCopy()
	copied.Name, copied.UID, copied.ResourceVersion = "acme-fe1-debug", "p9", "31"
	copied.Labels[v2alpha1.LabelTargetHash] = "h3"
	a.onPodAdded(copied, false)
	assert.Len(t, a.settleThrough(40), 1, "a pod of 3, made while fe1 was gated for 3")
}

// fe1 (u1) is deleted with --cascade=orphan mid-roll (its StatefulSet's
// current revision r1 on v1, update r2 on v2) and made again (u2), gated,
// for v2; the operator adopts the StatefulSet. operations.md: such a node
// "has its first pods judged as a new node's", and a new node's first pod
// made before its first release is a violation. A pod of the adopted
// StatefulSet's update revision is reported; one of its current revision is
// not, when the judge read the StatefulSet's revisions without the node's
// birth that ranAt honours.
func TestANodeMadeAgainWhileGatedHasItsFirstPodsJudgedAsANewNodesWhateverRevisionTheAdoptedStatefulSetMakesThemFrom(t *testing.T) {
	for name, made := range map[string]step{
		"update revision":  podAt(56, "acme-fe1-0", "v2", "r2"),
		"current revision": podAt(56, "acme-fe1-0", "v1", "r1"),
	} {
		t.Run(name, func(t *testing.T) {
			steps := []step{released(10, "u1", false, "v1", "v1"), rolling(11, "v1", "r1", "r1"), podAt(12, "acme-fe1-0", "v1", "r1"), podAt(13, "acme-fe1-1", "v1", "r1"),
				released(20, "u1", false, "v2", "v2"), rolling(21, "v2", "r1", "r2"), podGone(22, "acme-fe1-1"), podAt(23, "acme-fe1-1", "v2", "r2"),
				func(j *Judge) { nodeGone(40, "u1")(j); released(52, "u2", true, "v2", "")(j) },
				podGone(55, "acme-fe1-0"), made}
			assert.Equal(t, []string{KindRolledWhileGated}, run(steps), "the new fe1's first pod, made while it was gated")
		})
	}
}

// A new fe1, gated from its creation, provisioned anyway: its StatefulSet
// is created on v1 (revision ra), its template touched in the operator's
// next reconcile (a checksum annotation: revision rb, the same target), and
// it rolls with a partition, so the controller makes the pods below the
// partition at the current revision ra. The table row "a StatefulSet made
// for a gated node, its current revision its only one, rolls it out of
// order" counts the same provisioning; it was taken for a lost pod made
// up as the node ran before a roll — a roll of a node that never ran.
func TestAGatedNodeProvisionedFromItsStatefulSetsCurrentRevisionIsAViolationWhenThatRevisionNeverRan(t *testing.T) {
	steps := []step{node(10, true, "v1"), rolling(11, "v1", "ra", "ra"), rolling(12, "v1", "ra", "rb"), podAt(13, "acme-fe1-0", "v1", "ra")}
	assert.Equal(t, []string{KindRolledWhileGated}, run(steps))
}

// The auditor started mid-roll: its first list shows fe1's StatefulSet with
// current revision r1 and update r2, and pods of both, in either order.
// What r1 makes is known from its pods; the last of them, lost just before
// the gate and made up after it at r1, is what fe1 ran, not a violation.
func TestAPodMadeUpAtTheCurrentRevisionOfARollTheAuditorFoundUnderWayIsNoViolation(t *testing.T) {
	setFirst := []step{rolling(0, "v2", "r1", "r2"), podAt(0, "acme-fe1-0", "v1", "r1"), podAt(0, "acme-fe1-1", "v2", "r2")}
	podsFirst := []step{podAt(0, "acme-fe1-0", "v1", "r1"), podAt(0, "acme-fe1-1", "v2", "r2"), rolling(0, "v2", "r1", "r2")}
	for name, listed := range map[string][]step{"the StatefulSet listed first": setFirst, "its pods listed first": podsFirst} {
		t.Run(name, func(t *testing.T) {
			steps := append([]step{released(10, "u1", false, "v2", "v2")}, listed...)
			steps = append(steps, podGone(29, "acme-fe1-0"), node(30, true, "v3"), podAt(31, "acme-fe1-0", "v1", "r1"))
			assert.Empty(t, run(steps), "a pod of what fe1 ran before the roll, made up at the roll's current revision")
			steps[len(steps)-1] = podAt(31, "acme-fe1-0", "v3", "r1")
			assert.Equal(t, []string{KindRolledWhileGated}, run(steps), "a pod of v3 that says it is of r1")
		})
	}
}
