package audit

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// fedAuditor is an auditor fed by hand through informers fe, pods and
// sets (Frontends, pods, StatefulSets), the namespaces' store empty, each
// stream but the namespaces' listed once (at 1).
func fedAuditor(fe, pods, sets toolscache.SharedIndexInformer) *Auditor {
	a := &Auditor{judge: NewJudge(), handled: map[string]uint64{}, listedOnce: map[string]bool{}, listRV: map[string]uint64{},
		kinds: map[NodeKey]string{}, setRVs: map[NodeKey]map[string]uint64{}, confirmedNode: map[NodeKey]uint64{}, confirmSet: map[NodeKey]uint64{},
		DefaultMode:   v2alpha1.ModeEnforce,
		nodeInformers: map[string]toolscache.SharedIndexInformer{v2alpha1.KindFrontend: fe},
		podInformer:   pods, setInformer: sets,
		nsInformer: &fakeInf{store: toolscache.NewStore(toolscache.MetaNamespaceKeyFunc)}}
	for _, s := range []string{v2alpha1.KindFrontend, v2alpha1.KindBackend, streamPods, streamSets} {
		a.relisted(s, 0, 1)
	}
	return a
}

// handFedAuditor is fedAuditor, its namespaces listed too, namespace acme
// in mode.
func handFedAuditor(mode string) *Auditor {
	a := fedAuditor(&fakeInf{}, &fakeInf{}, &fakeInf{})
	_ = a.nsInformer.GetStore().Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme", Labels: map[string]string{v2alpha1.LabelSequencing: mode}}})
	a.relisted(streamNamespaces, 0, 1)
	a.handled[v2alpha1.KindBackend] = 1 << 40
	return a
}

// settleThrough says every stream handled through rv and settles.
func (a *Auditor) settleThrough(rv uint64) []Finding {
	for _, s := range []string{v2alpha1.KindFrontend, streamSets, streamPods} {
		a.seen(s, rv)
	}
	a.judge.PodsThrough = a.handled[streamPods]
	a.judge.CloseBlind(func(s string) uint64 { return a.handled[s] })
	found := a.judge.Settle(a.known)
	a.forgetGone(a.judge.Waiting(a.known))
	return found
}

// versionedNode is node name (uid) at revision rv, gated or not, on target
// hash "h"+version (version and revision "r-"+version in its spec), released
// for releasedVersion, as the auditor's informer keeps it (stripNode).
func versionedNode(name, uid string, rv uint64, gated bool, version, releasedVersion string) v2alpha1.Node {
	u := feObj(uid, strconv.FormatUint(rv, 10), gated, "h"+version)
	u.SetName(name)
	_ = unstructured.SetNestedField(u.Object, version, "spec", "expressVersion")
	_ = unstructured.SetNestedField(u.Object, "r-"+version, "spec", "deploymentRevision")
	ann := u.GetAnnotations()
	if releasedVersion != "" {
		ann[v2alpha1.AnnotationReleasedTarget] = "h" + releasedVersion
	}
	u.SetAnnotations(ann)
	n, _ := nodeOf(v2alpha1.KindFrontend, u)
	return n
}

// releasedAt is fe1 at rv, let go on version by the plan at when (its
// released-target and released-at).
func releasedAt(rv uint64, version string, when time.Time) v2alpha1.Node {
	rel := versionedNode("acme-fe1", "u1", rv, false, version, version)
	ann := rel.GetAnnotations()
	ann[v2alpha1.AnnotationReleasedAt] = when.Format(time.RFC3339Nano)
	rel.SetAnnotations(ann)
	return rel
}

// labelsOf are pods' (or templates') labels for version: with the target
// hash, or on the contract's fallback, the version and revision alone.
var labelsOf = map[string]func(version string) map[string]string{
	"target-hash labels": func(version string) map[string]string {
		return map[string]string{v2alpha1.LabelNode: "acme-fe1", v2alpha1.LabelTargetHash: "h" + version}
	},
	"fallback labels": func(version string) map[string]string {
		return map[string]string{v2alpha1.LabelNode: "acme-fe1", v2alpha1.LabelExpressVersion: version, v2alpha1.LabelDeploymentRevision: "r-" + version}
	},
}

func labelled(o metav1.Object, labels map[string]string) { o.SetLabels(labels) }

// rollsTo has fe1's StatefulSet take a template for version at rv, deletes
// pod old (when given) and adds pod (its name and creation time the
// caller's) made for version at rv+1: template and pod labelled as labels
// says.
func rollsTo(a *Auditor, labels func(version string) map[string]string, version string, rv uint64, old, pod *corev1.Pod) {
	s := setObj("s1", strconv.FormatUint(rv, 10), "")
	labelled(&s.Spec.Template, labels(version))
	a.onSet(s, false, false)
	if old != nil {
		a.onPodDeleted(old, a.podInformer)
	}
	pod.UID, pod.ResourceVersion = types.UID("p-"+strconv.FormatUint(rv, 10)), strconv.FormatUint(rv+1, 10)
	labelled(pod, labels(version))
	a.onPodAdded(pod, false)
}

// named is a pod of fe1 called name.
func named(name string) *corev1.Pod {
	p := podObj("", "", "")
	p.Name = name
	return p
}

// rollsTo2 has fe1's StatefulSet roll to version 2 at rv, its pod
// acme-fe1-1 made for it at rv+1, and settles: what the auditor finds.
func rollsTo2(a *Auditor, rv uint64) []Finding {
	rollsTo(a, labelsOf["target-hash labels"], "2", rv, nil, named("acme-fe1-1"))
	return a.settleThrough(rv + 2)
}

// gatedFor2 has fe1 run version 1 (pod and StatefulSet before the
// auditor's view, released at 10) and gated for 2 at 20.
func gatedFor2(a *Auditor) {
	a.onSet(setObj("s1", "5", "h1"), true, false)
	a.onPodAdded(podObj("p1", "6", "h1"), true)
	a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 10, false, "1", "1"), false)
	a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 20, true, "2", "1"), false)
}

// runs1 has fe1 run version 1 (its StatefulSet and pod labelled as labels
// says, before the auditor's view; the node released for it at 10) and
// returns its pod.
func runs1(a *Auditor, labels func(version string) map[string]string) *corev1.Pod {
	s1 := setObj("s1", "5", "")
	labelled(&s1.Spec.Template, labels("1"))
	a.onSet(s1, true, false)
	p1 := podObj("p1", "6", "")
	labelled(p1, labels("1"))
	a.onPodAdded(p1, true)
	a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 10, false, "1", "1"), false)
	return p1
}

// fe1 runs 1, is released for 2 (21) and gated for 3 (22) before the
// operator acted on 2, which it carries out from a cache that has not seen
// the gate: no violation, whether its pods carry the target hash or, on the
// contract's fallback, the version and revision (the node's released
// target, a hash, is then known by the version and revision it was
// released on).
func TestATargetReleasedBeforeTheGateCountsAsRunOnTheFallbackLabelsToo(t *testing.T) {
	for name, labels := range labelsOf {
		t.Run(name, func(t *testing.T) {
			a := handFedAuditor(v2alpha1.ModeEnforce)
			p1 := runs1(a, labels)
			a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 20, true, "2", "1"), false)
			a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 21, false, "2", "2"), false)
			a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 22, true, "3", "2"), false)
			rollsTo(a, labels, "2", 23, p1, named("acme-fe1-0"))
			assert.Empty(t, a.settleThrough(30), "the pod carries out 2, released before the gate of 22")
			rollsTo(a, labels, "3", 31, nil, named("acme-fe1-1"))
			assert.Len(t, a.settleThrough(32), 1, "a pod of 3, gated, is a violation")
		})
	}
}

// In audit, a rollout the plan let go within the grace of its pod's start
// (enforcing would have released it as soon) is not a would-have-held, on
// the fallback labels too: the plan's release is known by the version and
// revision the pod carries.
func TestARolloutLetGoWithinTheGraceIsNotReportedOnTheFallbackLabelsToo(t *testing.T) {
	for name, labels := range labelsOf {
		t.Run(name, func(t *testing.T) {
			a := handFedAuditor(v2alpha1.ModeAudit)
			a.judge.Grace = 5 * time.Second
			p1 := runs1(a, labels)
			a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 20, false, "2", "1"), false) // the plan holds 2
			p2 := named("acme-fe1-0")
			p2.CreationTimestamp = metav1.NewTime(at(0))
			rollsTo(a, labels, "2", 21, p1, p2)
			assert.Empty(t, a.settleThrough(24), "open until the plan lets it go")
			a.onNode(v2alpha1.KindFrontend, releasedAt(25, "2", at(1)), false)
			assert.Empty(t, a.settleThrough(30), "held 1 s, less than the 5 s grace")
		})
	}
}

// A pod relabelled to another node (a change its watch delivers as an
// update) leaves its old node: a pod of its name made there later is
// judged as any, and this one, rolled while fe1 is gated, is a violation.
func TestAPodRelabelledToAnotherNodeLeavesItsOldNode(t *testing.T) {
	a := handFedAuditor(v2alpha1.ModeEnforce)
	a.onSet(setObj("s1", "5", "h1"), true, false)
	p1 := podObj("p1", "6", "h1")
	a.onPodAdded(p1, true)
	a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 10, false, "1", "1"), false)
	moved := p1.DeepCopy()
	moved.ResourceVersion = "14"
	moved.Labels[v2alpha1.LabelNode] = "acme-fe2"
	a.onPodUpdated(p1, moved)
	gone := moved.DeepCopy()
	gone.ResourceVersion = "15"
	a.onPodDeleted(gone, a.podInformer)
	assert.Empty(t, a.settleThrough(16))
	a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 20, true, "2", "1"), false)
	a.onSet(setObj("s1", "21", "h2"), false, false)
	a.onPodAdded(podObj("p2", "22", "h2"), false)
	found := a.settleThrough(30)
	if assert.Len(t, found, 1, "acme-fe1-0 made for 2 while fe1 was gated") {
		assert.Equal(t, KindRolledWhileGated, found[0].Kind)
	}
}

// A pod relabelled into a node after its hold began runs there from then
// on: it is not what the node ran when the gate was added, and a pod of its
// target made while the node is gated is a violation.
func TestAPodRelabelledIntoAGatedNodeIsNotWhatItRanWhenGated(t *testing.T) {
	a := handFedAuditor(v2alpha1.ModeEnforce)
	gatedFor2(a)
	other := podObj("p9", "21", "h2")
	other.Name, other.Labels[v2alpha1.LabelNode] = "acme-fe1-9", "acme-fe2"
	a.onPodAdded(other, true)
	moved := other.DeepCopy()
	moved.ResourceVersion, moved.Labels[v2alpha1.LabelNode] = "25", "acme-fe1"
	a.onPodUpdated(other, moved)
	assert.Empty(t, a.settleThrough(26), "a pod moved in is not judged")
	found := rollsTo2(a, 30)
	if assert.Len(t, found, 1, "fe1 rolled to 2 while gated since 20") {
		assert.NotContains(t, found[0].Ran, "h2", "the pod moved in after the gate is not what fe1 ran")
	}
}

// A pod that gains the node label while its node is gated arrives as added,
// already running: it runs in the node from then on, not before the gate,
// and a pod of its target made while the node is gated is a violation.
func TestAPodLabelledIntoAGatedNodeIsNotWhatItRanWhenGated(t *testing.T) {
	a := handFedAuditor(v2alpha1.ModeEnforce)
	gatedFor2(a)
	stray := podObj("p9", "25", "h2")
	stray.Name = "acme-fe1-9"
	stray.Status.Phase = corev1.PodRunning
	a.onPodAdded(stray, false)
	assert.Empty(t, a.settleThrough(26), "a pod seen first already running is not judged")
	assert.Len(t, rollsTo2(a, 30), 1, "fe1 rolled to 2 while gated since 20")
}

// A StatefulSet that makes up a lost pod again and again during one long
// hold (each of what the node ran) leaves the judge keeping the pods alive
// at the hold's start and the one alive now, not one per loop.
func TestPodsMadeAndDeletedDuringAHoldDoNotPileUp(t *testing.T) {
	a := handFedAuditor(v2alpha1.ModeEnforce)
	a.onSet(setObj("s1", "5", "h1"), true, false)
	prev := podObj("p0", "6", "h1")
	a.onPodAdded(prev, true)
	a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 10, true, "2", "1"), false)
	for rv := uint64(20); rv < 2020; rv += 4 {
		gone := prev.DeepCopy()
		gone.ResourceVersion = strconv.FormatUint(rv, 10)
		a.onPodDeleted(gone, a.podInformer)
		prev = podObj("p"+strconv.FormatUint(rv, 10), strconv.FormatUint(rv+1, 10), "h1")
		a.onPodAdded(prev, false)
		assert.Empty(t, a.settleThrough(rv+2), "a pod of what the node ran, made up")
	}
	assert.LessOrEqual(t, len(a.judge.pods[fe1]), 2, "pods made and deleted within the hold kept")
	assert.Len(t, rollsTo2(a, 3000), 1, "what fe1 ran when gated is still known: a pod of 2 is a violation")
}

// Nodes made and deleted, their StatefulSets deleted after them (the
// garbage collector), leave nothing behind in the judge or the auditor.
func TestNodesMadeAndDeletedLeaveNothingBehind(t *testing.T) {
	a := handFedAuditor(v2alpha1.ModeEnforce)
	rv := uint64(10)
	next := func() uint64 { rv++; return rv }
	for i := range 100 {
		name := fmt.Sprintf("acme-fe%d", i)
		k := NodeKey{Namespace: "acme", Name: name}
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "acme", Name: name, UID: types.UID("s" + name)}}
		s.Spec.Template.Labels = map[string]string{v2alpha1.LabelNode: name, v2alpha1.LabelTargetHash: "h1"}
		a.onNode(v2alpha1.KindFrontend, versionedNode(name, "u"+name, next(), false, "1", "1"), false)
		s.ResourceVersion = strconv.FormatUint(next(), 10)
		a.onSet(s, false, false)
		a.confirmedNode[k], a.confirmSet[k] = rv, rv // as a fresh read would
		a.onNode(v2alpha1.KindFrontend, versionedNode(name, "u"+name, next(), false, "1", "1"), true)
		a.settleThrough(next())
		gone := s.DeepCopy()
		gone.ResourceVersion = strconv.FormatUint(next(), 10)
		a.onSet(gone, false, true)
		a.settleThrough(next())
	}
	assert.Empty(t, a.judge.nodes, "node versions")
	assert.Empty(t, a.judge.sets, "StatefulSets of deleted nodes")
	assert.Empty(t, a.kinds, "kinds of deleted nodes")
	assert.Empty(t, a.setRVs, "StatefulSet revisions of deleted nodes")
	assert.Empty(t, a.confirmedNode, "fresh reads of deleted nodes")
	assert.Empty(t, a.confirmSet, "fresh reads of deleted nodes' StatefulSets")
}

// A node gated for long, its StatefulSet's status written again and again
// (its pods Ready or not), keeps one version of a template that does not
// change, not one per write.
func TestStatusWritesOfAStatefulSetDoNotPileUpDuringAHold(t *testing.T) {
	a := handFedAuditor(v2alpha1.ModeEnforce)
	a.onSet(setObj("s1", "5", "h1"), true, false)
	a.onPodAdded(podObj("p1", "6", "h1"), true)
	a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 10, true, "2", "1"), false)
	for rv := uint64(20); rv < 2020; rv += 2 {
		a.onSet(setObj("s1", strconv.FormatUint(rv, 10), "h1"), false, false)
		a.settleThrough(rv + 1)
	}
	assert.Len(t, a.judge.sets[fe1]["acme-fe1"], 1, "versions of one template kept")
}

// The auditor starts in audit while fe1's version 2, started ahead of the
// plan, is still held by it: its first lists show fe1 held for 2 and a pod
// of 2 made before them. The would-have-held is reported when the plan lets
// 2 go, with pods carrying the target hash; on the contract's fallback a
// pod's version and revision cannot tell 2 from the target before a
// config-only change, and nothing is opened.
func TestAWouldHaveHeldUnderWayInTheFirstListsIsReportedWhenThePlanLetsItGo(t *testing.T) {
	for name, c := range map[string]struct {
		labels   func(version string) map[string]string
		reported bool
	}{
		"target-hash labels": {labels: labelsOf["target-hash labels"], reported: true},
		"fallback labels":    {labels: labelsOf["fallback labels"], reported: false},
	} {
		t.Run(name, func(t *testing.T) {
			a := handFedAuditor(v2alpha1.ModeAudit)
			a.judge.Grace = 5 * time.Second
			s := setObj("s1", "5", "")
			labelled(&s.Spec.Template, c.labels("2"))
			a.onSet(s, true, false)
			p := podObj("p2", "6", "")
			labelled(p, c.labels("2"))
			p.CreationTimestamp = metav1.NewTime(at(0))
			a.onPodAdded(p, true)
			a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 20, false, "2", "1"), false) // the plan holds 2
			a.judge.FoundUnderWay()
			assert.Empty(t, a.settleThrough(21), "open until the plan lets it go")
			a.onNode(v2alpha1.KindFrontend, releasedAt(25, "2", at(30)), false)
			found := a.settleThrough(30)
			if !c.reported {
				assert.Empty(t, found)
				return
			}
			if assert.Len(t, found, 1) {
				assert.Equal(t, KindWouldHaveHeld, found[0].Kind)
				assert.Equal(t, 30*time.Second, found[0].HeldFor)
			}
		})
	}
}
