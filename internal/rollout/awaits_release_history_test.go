package rollout

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// Own oracle (DESIGN §4: a node with a new target waits for its upgrade
// predecessors Ready and on target, "change to all": FE1, FE2, BE; §9:
// "Switching a namespace to enforce mid-rollout releases nothing out of
// order"). be was released for v1, then v2 (rolled, converged); the
// chart reverts it to v1 in audit (v1 stays in its rollout-history). At
// the switch to enforce nothing of v1 runs, so be is gated; its
// StatefulSet template is at v1. The chart then applies v3 (enforce:
// stamped v3, gated). be is released for v2 only; a pod of v1 now is of
// neither its released nor its current target, made from a template moved
// without a release — exactly the never-released case
// TestAPodMadeForATargetItsNodeWasNeverReleasedForStillWaitsOnceTheNodeIsChangedAgain
// closes — but because v1 was released once, the history
// check let it go by the pod rule: be has no provisioning predecessor, so
// it started v1 while fe1 and fe2 were not on target.
func TestAPodOfAnOldTargetInTheHistoryMadeFromATemplateMovedInAuditWaitsOnceTheRevertIsSuperseded(t *testing.T) {
	w, s, v1hash, v2hash := revertedTenant(t)
	be, fe1, fe2 := w.name("be"), w.name("fe1"), w.name("fe2")
	s.SetTemplates = map[string][]Template{be: {{Hash: v1hash}}}
	adopt, gate := Unheld(s)
	require.Empty(t, adopt, "at the switch nothing is adopted")
	require.Contains(t, gate, be, "at the switch be is gated")
	s = changedAgain(s, "v3")
	s.SetTemplates = map[string][]Template{be: {{Hash: v1hash}}}
	v3hash := StampedTarget(s.Nodes[be])
	require.NotContains(t, []string{v1hash, v2hash}, v3hash, "be is stamped for a third target")
	require.Equal(t, v2hash, ReleasedTarget(s.Nodes[be]), "be is released for v2")
	require.False(t, s.converged(fe1) && s.converged(fe2), "fe1 and fe2 are not both on target")
	waitsForItsRelease(t, s, be, be+"-0", v1hash)
}

// waitsForItsRelease asserts that a new pod of node name made for hash may
// not start (the pod webhook) and, created held, is let go neither by Plan
// nor by the release guard.
func waitsForItsRelease(t *testing.T, s *Snapshot, name, pod, hash string) {
	t.Helper()
	s.Pods = maps.Clone(s.Pods)
	notReady := map[string]string{string(corev1.PodReady): "False"}
	s.Pods[name] = []Pod{{Name: pod, Hash: hash, Conditions: notReady}}
	ok, why := PodMayStart(s, name, hash)
	assert.False(t, ok, "the pod webhook admits %s (target %s) schedulable: %s", pod, hash, why)
	s.Pods[name] = []Pod{{Name: pod, Hash: hash, Conditions: notReady, Gates: []string{v2alpha1.GateSequencer}}}
	d := decisionOf(t, Plan(s), name)
	assert.NotContains(t, d.PodsToRelease, pod, "Plan lets %s go: %s", pod, d.Condition.Message)
	ok, _ = ReleaseStands(s, name, pod)
	assert.False(t, ok, "the release guard lets %s go", pod)
}

// Same, the revert undone: be gated at the switch for v1 (template at
// v1), then the chart puts it back on v2 (stamped v2 = released v2, the
// webhook gates it). A held v1 pod is of a target be no longer wants and
// is not released for; TestAPodHeldForItsNodesReleaseIsNotLetGoWhenTheChangeIsReverted
// keeps such a pod held when its target is not in the history, but v1 is.
func TestAPodOfAHistoryTargetHeldAfterTheSwitchIsNotLetGoWhenTheRevertIsUndone(t *testing.T) {
	w, s, v1hash, v2hash := revertedTenant(t)
	be := w.name("be")
	s = regated(s, be, v2, v2hash)
	s.SetTemplates = map[string][]Template{be: {{Hash: v1hash}}}
	waitsForItsRelease(t, s, be, be+"-0", v1hash)
}

// regated is s with node name changed to version (target hash) through
// the webhook in enforce: stamped and gated.
func regated(s *Snapshot, name, version, hash string) *Snapshot {
	out := *s
	out.Nodes = maps.Clone(s.Nodes)
	n := s.Nodes[name].DeepCopyObject().(v2alpha1.Node)
	n.NodeSpec().ExpressVersion = version
	setAnnotation(n, v2alpha1.AnnotationTargetHash, hash)
	n.NodeSpec().AddGate(v2alpha1.GateSequencer)
	out.Nodes[name] = n
	return &out
}
