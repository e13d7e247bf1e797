package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// A snapshot holds one node per name. The validating webhook refuses a
// node whose name another kind has, reading its cache; two created at once
// (one Argo CD sync, a typo'd kind) can both pass it, and the Frontend,
// which is kept, hides the Backend. A Frontend with the Backend's name is
// not the Backend: every Frontend waits for the Backend as for a missing
// one, and nothing goes before it.
func TestAFrontendWithTheBackendsNameIsNotTheBackend(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name  string
		nodes []v2alpha1.Node
		// held is the node that must stay gated, its new pods held, for
		// the reason's message to say missing.
		held, missing string
	}{
		{
			name:    "a Frontend created with the Backend's name beside it holds fe1: the Backend it hides has no pod",
			nodes:   []v2alpha1.Node{clashNode(v2alpha1.KindBackend, "acme-be", now), clashNode(v2alpha1.KindFrontend, "acme-be", now), clashNode(v2alpha1.KindFrontend, "acme-fe1", now)},
			held:    "acme-fe1",
			missing: "acme-be (Backend): it does not exist, a Frontend has its name",
		},
		{
			name:    "a Frontend with the Backend's name and no Backend holds fe1 as a missing Backend does",
			nodes:   []v2alpha1.Node{clashNode(v2alpha1.KindFrontend, "acme-be", now), clashNode(v2alpha1.KindFrontend, "acme-fe1", now)},
			held:    "acme-fe1",
			missing: "acme-be (Backend): it does not exist, a Frontend has its name",
		},
		{
			name:    "a Frontend with the Backend's name waits for the Backend itself, and says so, not that it waits for itself",
			nodes:   []v2alpha1.Node{clashNode(v2alpha1.KindFrontend, "acme-be", now), clashNode(v2alpha1.KindFrontend, "acme-fe1", now)},
			held:    "acme-be",
			missing: "acme-be (Backend): it does not exist, a Frontend has its name",
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := SnapshotOf(Objects{Nodes: c.nodes}, Tenant{Namespace: "tenant", ClusterName: "acme"}, defaults.Builtin(), now)
			for _, d := range Plan(s) {
				if d.Node == c.held {
					assert.True(t, d.Gated, "%s stays gated: %s", c.held, d.Condition.Message)
					assert.Equal(t, v2alpha1.ReasonPrerequisiteNotFound, d.Condition.Reason, d.Condition.Message)
					assert.Contains(t, d.Condition.Message, c.missing)
				}
			}
			ok, why := ReleaseStands(s, c.held, "")
			assert.False(t, ok, "the release guard refuses %s's release", c.held)
			assert.Contains(t, why, c.missing)
			ok, why = PodsMayStart(s, c.held)
			assert.False(t, ok, "%s's new pods are held", c.held)
			assert.Contains(t, why, c.missing)
		})
	}
}

// clashNode is node name of tenant acme, of kind, created an hour before
// now with the webhook's defaults and its first rollout gated.
func clashNode(kind, name string, now time.Time) v2alpha1.Node {
	n := v2alpha1.NewNode(kind)
	n.SetName(name)
	n.SetNamespace("tenant")
	n.SetUID(types.UID(kind + "-" + name))
	n.SetGeneration(1)
	n.SetCreationTimestamp(metav1.NewTime(now.Add(-time.Hour)))
	n.NodeSpec().ClusterConfig.ClusterName = "acme"
	n.NodeSpec().ExpressVersion = "express-1"
	defaults.Builtin().Apply(n)
	setAnnotation(n, v2alpha1.AnnotationTargetHash, "hash-"+name)
	n.NodeSpec().AddGate(v2alpha1.GateSequencer)
	return n
}

// A Backend of another tenant with a Frontend's name (both admitted at
// once, or made before the webhook) shares the name with it: a pod labelled
// with the name may be either's, so in neither tenant does it count, start
// or get let go, and both nodes say why. The Frontend's own gate is judged
// in its own tenant (ReleaseStands is asked with the node's kind by the
// guard, GatherFreshFor).
func TestANameSharedAcrossTenantsHoldsItsPodsInBoth(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	fe1 := clashNode(v2alpha1.KindFrontend, "acme-fe1", now)
	other := clashNode(v2alpha1.KindBackend, "acme-fe1", now)
	other.NodeSpec().ClusterConfig.ClusterName = "zzz"
	other.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
	held := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1-0", Namespace: "tenant", UID: "pod", CreationTimestamp: metav1.NewTime(now),
			Labels: map[string]string{v2alpha1.LabelNode: "acme-fe1", v2alpha1.LabelTargetHash: "hash-acme-fe1"}},
		Spec: corev1.PodSpec{SchedulingGates: []corev1.PodSchedulingGate{{Name: v2alpha1.GateSequencer}}},
	}
	read := Objects{Nodes: []v2alpha1.Node{clashNode(v2alpha1.KindBackend, "acme-be", now), fe1, other}, Pods: []corev1.Pod{held}}
	for _, cluster := range []string{"acme", "zzz"} {
		s := SnapshotOf(read, Tenant{Namespace: "tenant", ClusterName: cluster}, defaults.Builtin(), now)
		assert.Empty(t, s.Pods["acme-fe1"], "in tenant %s, no pod of the shared name counts for its node", cluster)
		ok, why := PodsMayStart(s, "acme-fe1")
		assert.False(t, ok, "in tenant %s, a new pod of acme-fe1 is held", cluster)
		assert.Contains(t, why, "a Backend and a Frontend of the namespace are both called acme-fe1")
		ok, _ = ReleaseStands(s, "acme-fe1", "acme-fe1-0")
		assert.False(t, ok, "in tenant %s, the pod's release does not stand", cluster)
		for _, d := range Plan(s) {
			assert.NotContains(t, d.PodsToRelease, "acme-fe1-0", "tenant %s's plan lets no pod of the shared name go", cluster)
			if d.Node == "acme-fe1" {
				assert.Equal(t, v2alpha1.ReasonNameShared, d.Condition.Reason, "tenant %s: %s", cluster, d.Condition.Message)
				assert.Equal(t, Gated(s.Nodes["acme-fe1"]), d.Gated, "tenant %s: a gated node stays gated, an ungated one is not gated", cluster)
			}
		}
	}
}

// A node rolling out (released, not yet Ready on its target) whose name is
// shared says so in its condition once: planned again on the condition it
// wrote, its decision does not change (no status write each pass).
func TestARollingNodesSharedNameIsSaidOnce(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	fe1 := clashNode(v2alpha1.KindFrontend, "acme-fe1", now)
	fe1.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
	setAnnotation(fe1, v2alpha1.AnnotationReleasedTarget, "hash-acme-fe1")
	setAnnotation(fe1, v2alpha1.AnnotationReleasedGeneration, "1")
	fe1.NodeStatus().Conditions = []metav1.Condition{{Type: v2alpha1.ConditionPrerequisitesReady, Status: metav1.ConditionTrue,
		Reason: v2alpha1.ReasonReleased, Message: "rolling out express-1 (released)", ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(now)}}
	other := clashNode(v2alpha1.KindBackend, "acme-fe1", now)
	other.NodeSpec().ClusterConfig.ClusterName = "zzz"
	read := Objects{Nodes: []v2alpha1.Node{clashNode(v2alpha1.KindBackend, "acme-be", now), fe1, other}}
	var first Decision
	for pass := range 2 {
		s := SnapshotOf(read, Tenant{Namespace: "tenant", ClusterName: "acme"}, defaults.Builtin(), now)
		for _, d := range Plan(s) {
			if d.Node != "acme-fe1" {
				continue
			}
			assert.Equal(t, 1, strings.Count(d.Condition.Message, "are both called acme-fe1"), "pass %d: %s", pass, d.Condition.Message)
			if pass == 0 {
				first = d
				meta.SetStatusCondition(&fe1.NodeStatus().Conditions, d.Condition)
			} else {
				assert.Equal(t, first.Condition.Message, d.Condition.Message)
				assert.False(t, d.Changed(fe1), "planned again on what it wrote, nothing changes")
			}
		}
	}
}

// A scoped read builds its snapshot from the tenant's nodes alone, where a
// shared name's pods look the node's: overlaid on a snapshot that knows the
// name is shared, none of them counts.
func TestAScopedReadOverlaidCountsNoPodOfASharedName(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	fe1 := clashNode(v2alpha1.KindFrontend, "acme-fe1", now)
	cached := &Snapshot{Nodes: map[string]v2alpha1.Node{"acme-fe1": fe1}, SharedNames: map[string]bool{"acme-fe1": true}}
	read := &Snapshot{Pods: map[string][]Pod{"acme-fe1": {{Name: "acme-fe1-0", Conditions: map[string]string{"Ready": "True"}}}}}
	out := cached.WithWorkloadOf(read, []string{"acme-fe1"})
	assert.Empty(t, out.Pods["acme-fe1"])
	assert.True(t, out.SharedNames["acme-fe1"])
}

// A change to all nodes goes FE1, FE2, BE: be may not be released while
// its live upgrade predecessor fe2 is not Ready on its target.
// A Frontend "acme-be" (tenant acme, up:false, ungated) created at the same
// instant as the Backend (both pass nameTaken) hides the Backend in the
// snapshot; the release guard, asked with kind Backend, judges the
// Frontend's decision (ungated → "stands").
func TestTheGuardDoesNotJudgeANodesReleaseOnTheOtherKindOfItsName(t *testing.T) {
	now := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	made := now.Add(-2 * time.Hour)
	mk := func(kind, name, target, released string, ready bool, podHash string) (v2alpha1.Node, corev1.Pod) {
		n := orphanTestNode(kind, name, made)
		setAnnotation(n, v2alpha1.AnnotationTargetHash, target)
		setAnnotation(n, v2alpha1.AnnotationReleasedTarget, released)
		if target != released {
			n.NodeSpec().AddGate(v2alpha1.GateSequencer)
		}
		return n, orphanTestPod(name+"-0", name, podHash, now.Add(-time.Minute), ready, nil)
	}
	be, bePod := mk(v2alpha1.KindBackend, "acme-be", "be-2", "be-1", true, "be-1")        // gated, new target
	fe1, fe1Pod := mk(v2alpha1.KindFrontend, "acme-fe1", "fe1-2", "fe1-2", true, "fe1-2") // done
	fe2, fe2Pod := mk(v2alpha1.KindFrontend, "acme-fe2", "fe2-2", "fe2-1", true, "fe2-1") // gated, not on target
	tenant := Tenant{Namespace: "tenant", ClusterName: "acme"}

	// Control: without the stray Frontend the guard refuses be's release.
	read := Objects{Nodes: []v2alpha1.Node{be, fe1, fe2}, Pods: []corev1.Pod{bePod, fe1Pod, fe2Pod}}
	if ok, _ := ReleaseStands(SnapshotOf(read, tenant, defaults.Builtin(), now), "acme-be", ""); ok {
		t.Fatalf("control: be's release stands while fe2 is not on target")
	}

	stray := orphanTestNode(v2alpha1.KindFrontend, "acme-be", made)
	stray.NodeSpec().Up = ptr.To(false)
	read.Nodes = append(read.Nodes, stray)
	s := SnapshotOf(read, tenant, defaults.Builtin(), now)
	if ok, _ := ReleaseStands(s, "acme-be", ""); ok {
		t.Errorf("the guard lets the Backend acme-be's (stale) release stand while its upgrade-predecessor fe2 is not on target; s.Nodes[acme-be] is a %s", s.Nodes["acme-be"].NodeKind())
	}
}
