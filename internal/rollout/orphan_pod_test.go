package rollout

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// orphanTestNode is node name of tenant acme, released for its target and
// recorded converged (RolloutComplete), created at created.
func orphanTestNode(kind, name string, created time.Time) v2alpha1.Node {
	n := clashNode(kind, name, created.Add(time.Hour))
	n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
	n.SetGeneration(2)
	setAnnotation(n, v2alpha1.AnnotationReleasedTarget, "hash-"+name)
	setAnnotation(n, v2alpha1.AnnotationReleasedGeneration, "2")
	n.NodeStatus().Conditions = []metav1.Condition{{Type: v2alpha1.ConditionPrerequisitesReady, Status: metav1.ConditionTrue,
		Reason: v2alpha1.ReasonRolloutComplete, ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(created)}}
	return n
}

func orphanTestPod(name, node, hash string, created time.Time, ready bool, owner *metav1.OwnerReference) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant", UID: types.UID("pod-" + name),
		CreationTimestamp: metav1.NewTime(created), Labels: map[string]string{v2alpha1.LabelNode: node, v2alpha1.LabelTargetHash: hash}}}
	st := corev1.ConditionFalse
	if ready {
		st = corev1.ConditionTrue
	}
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: st}}
	if owner != nil {
		p.OwnerReferences = []metav1.OwnerReference{*owner}
	}
	return p
}

// A Frontend "acme-be" (another tenant's, a typo'd kind, created after the
// Backend acme-be) ran a pod labelled acme-be; the Frontend is deleted, its
// StatefulSet already gone, its pod not yet collected. The Backend acme-be is up, recovering, with no pod
// of its own (its StatefulSet deleted while it was down, or not made yet).
// By DESIGN §2/§4 the Backend is not Ready (only the node's own workload
// counts), so fe1's recovering pod must stay gated.
func TestAPodOfAnotherKindsStatefulSetLeftToTheGarbageCollectorIsNotTheBackendsReadiness(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	be := orphanTestNode(v2alpha1.KindBackend, "acme-be", now.Add(-2*time.Hour))
	// The Frontend's pod, made an hour after the Backend, its controller a
	// StatefulSet the fresh read no longer finds (collected first).
	stray := orphanTestPod("acme-be-0", "acme-be", "hash-acme-be", now.Add(-time.Hour), true,
		&metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "acme-be", UID: "sts-of-frontend-acme-be", Controller: ptr.To(true)})
	s := fe1RecoveringBeside(now, be, stray, false)

	// Oracle (DESIGN): the Backend's own pods are those its own
	// StatefulSet made; it has none.
	if ok, _ := PodsMayStart(s, "acme-fe1"); ok {
		t.Errorf("fe1's recovering pod may start while the Backend has no pod of its own (counted: %v)", s.Pods["acme-be"])
	}
	for _, d := range Plan(s) {
		if d.Node == "acme-fe1" && len(d.PodsToRelease) > 0 {
			t.Errorf("Plan releases %v of fe1 while acme-be runs no pod of its own: %s", d.PodsToRelease, d.Condition.Message)
		}
	}
	if ok, _ := ReleaseStands(s, "acme-fe1", "acme-fe1-0"); ok {
		t.Errorf("the release guard lets fe1's held pod go")
	}
}

// fe1RecoveringBeside is the snapshot of tenant acme at now: be and pod
// stray of be's name, and fe1, converged, crashed, its StatefulSet's new
// pod held by the pod webhook; its StatefulSet the only one read, or, with
// setsUnread, none may be read (RBAC).
func fe1RecoveringBeside(now time.Time, be v2alpha1.Node, stray corev1.Pod, setsUnread bool) *Snapshot {
	read := fe1RecoveringRead(now, be, stray)
	if setsUnread {
		read.StatefulSets, read.StatefulSetsUnread = nil, true
	}
	return SnapshotOf(read, orphanTenant, defaults.Builtin(), now)
}

var orphanTenant = Tenant{Namespace: "tenant", ClusterName: "acme"}

// fe1RecoveringRead is what a fresh read of fe1RecoveringBeside's tenant
// returns, with pods (be's) and sets beside fe1's.
func fe1RecoveringRead(now time.Time, be v2alpha1.Node, pods ...corev1.Pod) Objects {
	fe1 := orphanTestNode(v2alpha1.KindFrontend, "acme-fe1", now.Add(-2*time.Hour))
	fe1sts := orphanTestSet("acme-fe1", fe1)
	held := orphanTestPod("acme-fe1-0", "acme-fe1", "hash-acme-fe1", now, false, setOwner(fe1sts.Name, fe1sts.UID))
	held.Spec.SchedulingGates = []corev1.PodSchedulingGate{{Name: v2alpha1.GateSequencer}}
	return Objects{Nodes: []v2alpha1.Node{be, fe1}, Pods: append(pods, held), StatefulSets: []appsv1.StatefulSet{fe1sts}}
}

// setOwner is a pod's controller reference to apps/v1 StatefulSet name.
func setOwner(name string, uid types.UID) *metav1.OwnerReference {
	return &metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name, UID: uid, Controller: ptr.To(true)}
}

// cachedSnapshotOf is read as the sequencer's cache shows it (Gather): its
// nodes and pods, no StatefulSet.
func cachedSnapshotOf(read Objects, now time.Time) *Snapshot {
	s := &Snapshot{Tenant: orphanTenant, Orders: defaults.Builtin(), Now: now, Nodes: map[string]v2alpha1.Node{}}
	for _, n := range read.Nodes {
		s.Nodes[n.GetName()] = n
	}
	all := map[string][]Pod{}
	for i := range read.Pods {
		name := read.Pods[i].Labels[v2alpha1.LabelNode]
		all[name] = append(all[name], PodOf(&read.Pods[i]))
	}
	s.Pods = CurrentPods(all, s.Nodes, nil)
	return s
}

// releasesPod reports whether decisions let pod go.
func releasesPod(decisions []Decision, pod string) bool {
	return slices.ContainsFunc(decisions, func(d Decision) bool { return slices.Contains(d.PodsToRelease, pod) })
}

// Backend acme-be was made again (kubectl replace --force) and runs on its
// new StatefulSet, Ready; its old StatefulSet is gone, and of the old pods
// one is left Terminating on a machine that was lost (no kubelet confirms
// its end). fe1 crashed and its new pod is held. A fresh read counts the
// old pod for no node and lets fe1's pod go; the cache, which holds no
// StatefulSets, must not hold what the fresh read lets go: a plan of the
// cache that releases nothing is never read fresh, and fe1 would wait for
// as long as the lost machine is not removed.
func TestAPodLeftTerminatingByAGoneStatefulSetDoesNotHoldTheCachesPlan(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	be := orphanTestNode(v2alpha1.KindBackend, "acme-be", now.Add(-2*time.Hour))
	bests := orphanTestSet("acme-be", be)
	own := orphanTestPod("acme-be-0", "acme-be", "hash-acme-be", now.Add(-time.Hour), true, setOwner(bests.Name, bests.UID))
	terminating := func(owner types.UID) corev1.Pod {
		p := orphanTestPod("acme-be-2", "acme-be", "hash-acme-be", now.Add(-3*time.Hour), false, setOwner("acme-be", owner))
		p.DeletionTimestamp = ptr.To(metav1.NewTime(now.Add(-time.Minute)))
		return p
	}

	read := fe1RecoveringRead(now, be, own, terminating("sts-of-the-earlier-acme-be"))
	read.StatefulSets = append(read.StatefulSets, bests)
	require.True(t, releasesPod(Plan(SnapshotOf(read, orphanTenant, defaults.Builtin(), now)), "acme-fe1-0"),
		"the fresh read lets fe1's pod go: the old pod's StatefulSet is gone")
	cached := cachedSnapshotOf(read, now)
	assert.True(t, releasesPod(Plan(cached), "acme-fe1-0"),
		"the cache's plan holds fe1's pod on a pod of a StatefulSet gone (counted: %v), and is never read fresh", cached.Pods["acme-be"])

	// A pod being deleted of the StatefulSet the Backend runs on (a pod
	// lost, a roll) is the Backend's, not Ready, in the cache too.
	read = fe1RecoveringRead(now, be, own, terminating(bests.UID))
	read.StatefulSets = append(read.StatefulSets, bests)
	assert.False(t, releasesPod(Plan(cachedSnapshotOf(read, now)), "acme-fe1-0"),
		"the cache's plan lets fe1's pod go while the Backend's own pod is being deleted")
}

// orphanTestSet is node n's StatefulSet, named after it, owned by it, one replica,
// its controller caught up, converged on n's target.
func orphanTestSet(name string, n v2alpha1.Node) appsv1.StatefulSet {
	sts := appsv1.StatefulSet{}
	sts.Name, sts.Namespace, sts.UID = name, "tenant", types.UID("sts-"+string(n.GetUID()))
	sts.CreationTimestamp = n.GetCreationTimestamp()
	sts.OwnerReferences = []metav1.OwnerReference{{APIVersion: v2alpha1.GroupVersion.String(), Kind: n.NodeKind(), Name: name, UID: n.GetUID(), Controller: ptr.To(true)}}
	sts.Generation, sts.Status.ObservedGeneration = 1, 1
	sts.Spec.Replicas = ptr.To[int32](1)
	h := StampedTarget(n)
	sts.Spec.Template.Labels = map[string]string{v2alpha1.LabelNode: name, v2alpha1.LabelTargetHash: h}
	sts.Status.CurrentRevision, sts.Status.UpdateRevision = h, h
	return sts
}

// The same path, one kind: Backend acme-be deleted and created again
// (kubectl replace --force) at T. Its old StatefulSet, not yet collected,
// made up a lost pod at T+1s (Ready: the kubelet runs it); then the
// garbage collector deleted the old StatefulSet and has not reached the
// pod yet. The new Backend is gated, never released, with no StatefulSet
// yet: it runs nothing. fe1 crashed and its new pod is held. Where the
// StatefulSets may not be read (RBAC), the pod is judged by its creation
// time, as before the fresh read could tell it an orphan.
func TestAPodAnEarlierNodesStatefulSetMadeUpAfterTheNewNodeIsNotItsReadiness(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	made := now.Add(-time.Minute)
	be := orphanTestNode(v2alpha1.KindBackend, "acme-be", made)
	be.SetUID("Backend-acme-be-2")
	be.SetGeneration(1)
	for _, k := range SequencerOnly {
		delete(be.GetAnnotations(), k)
	}
	be.NodeStatus().Conditions = nil
	be.NodeSpec().AddGate(v2alpha1.GateSequencer)
	stray := orphanTestPod("acme-be-0", "acme-be", "hash-acme-be", made.Add(time.Second), true,
		&metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "acme-be", UID: "sts-Backend-acme-be-1", Controller: ptr.To(true)})
	s := fe1RecoveringBeside(now, be, stray, false)
	if ok, _ := PodsMayStart(s, "acme-fe1"); ok {
		t.Errorf("fe1's recovering pod may start while the new Backend, gated for its first rollout, runs nothing (counted: %d pods)", len(s.Pods["acme-be"]))
	}
	if ok, _ := ReleaseStands(s, "acme-fe1", "acme-fe1-0"); ok {
		t.Errorf("the release guard lets fe1's held pod go")
	}
	unread := fe1RecoveringBeside(now, be, stray, true)
	assert.Len(t, unread.Pods["acme-be"], 1, "with the StatefulSets unread, a pod made after the node counts for it, by its creation time")
}

// The Backend's pod is made by a controller of kind StatefulSet that is not
// apps/v1's (OpenKruise's Advanced StatefulSet): another controller, whose
// pods are taken as they are. Only apps/v1 StatefulSets are read, so not
// finding it among them says nothing of it being gone: the Backend, Ready,
// lets fe1's recovering pod start.
func TestAPodOfAnotherGroupsStatefulSetCountsForItsNode(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	be := orphanTestNode(v2alpha1.KindBackend, "acme-be", now.Add(-2*time.Hour))
	own := orphanTestPod("acme-be-0", "acme-be", "hash-acme-be", now.Add(-time.Hour), true,
		&metav1.OwnerReference{APIVersion: "apps.kruise.io/v1beta1", Kind: "StatefulSet", Name: "acme-be", UID: "kruise-sts-acme-be", Controller: ptr.To(true)})
	s := fe1RecoveringBeside(now, be, own, false)
	if len(s.Pods["acme-be"]) != 1 || !s.isReady("acme-be") {
		t.Errorf("acme-be runs its one pod Ready (an apps.kruise.io StatefulSet's: another controller), read with %d pods, Ready=%v",
			len(s.Pods["acme-be"]), s.isReady("acme-be"))
	}
	if ok, why := PodsMayStart(s, "acme-fe1"); !ok {
		t.Errorf("fe1's recovering pod is held though its predecessor is Ready: %s", why)
	}
}

// The fleet view (kubectl express status) run by a user who may not list
// StatefulSets regroups the objects by namespace and keeps that they were
// not read: a pod of a StatefulSet is not taken for an orphan, and a tenant
// that is done shows its node on target.
func TestTheFleetViewKeepsThatStatefulSetsWereNotRead(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	be := orphanTestNode(v2alpha1.KindBackend, "acme-be", now.Add(-2*time.Hour))
	pod := orphanTestPod("acme-be-0", "acme-be", StampedTarget(be), now.Add(-time.Hour), true,
		&metav1.OwnerReference{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "acme-be", UID: "sts-acme-be", Controller: ptr.To(true)})
	read := Objects{Nodes: []v2alpha1.Node{be}, Pods: []corev1.Pod{pod}, StatefulSetsUnread: true}
	direct := SnapshotOf(read, Tenant{Namespace: "tenant", ClusterName: "acme"}, defaults.Builtin(), now)
	if !direct.converged("acme-be") {
		t.Fatalf("control: SnapshotOf counts the pod with StatefulSets unread")
	}
	fleet := FleetOf(read, defaults.Builtin(), now, DefaultProgressDeadline, DefaultGrouping)
	if len(fleet) != 1 || fleet[0].OnTarget != 1 {
		t.Errorf("fleet view: %+v; want acme-be on target (1 of 1), as SnapshotOf reads the same objects", fleet)
	}
}
