package rollout

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// changedAgain is s with every node changed to version, through the
// webhook in enforce: stamped anew and gated.
func changedAgain(s *Snapshot, version string) *Snapshot {
	out := *s
	out.Nodes = map[string]v2alpha1.Node{}
	for name, n := range s.Nodes {
		c := n.DeepCopyObject().(v2alpha1.Node)
		c.NodeSpec().ExpressVersion = version
		setAnnotation(c, v2alpha1.AnnotationTargetHash, TargetHashOf(c.NodeSpec()))
		c.NodeSpec().AddGate(v2alpha1.GateSequencer)
		out.Nodes[name] = c
	}
	return &out
}

// Audit left a change to all (v1 → v2) ungated; the operator moved be's
// StatefulSet template to v2 but no pod of v2 ran yet. At the switch be is
// gated (nothing of v2 runs). The chart then applies v3 to all (enforce:
// stamped v3, gated). The operator honours the gate and leaves the
// template at v2, so be's StatefulSet keeps making pods of v2 — a target
// be was never released for. DESIGN §4: a node with a new target waits
// for its upgrade predecessors Ready and on target; §9: the switch
// releases nothing out of order. AwaitsRelease matched only the
// stamped hash, so a v2 pod of be went by the pod rule alone (be has no
// provisioning predecessor) while fe1 and fe2 were not on target.
func TestAPodMadeForATargetItsNodeWasNeverReleasedForStillWaitsOnceTheNodeIsChangedAgain(t *testing.T) {
	w, s := auditLeftAChangeToAll(t)
	be, fe1, fe2 := w.name("be"), w.name("fe1"), w.name("fe2")
	v1hash := ReleasedTarget(s.Nodes[be])
	v2hash := StampedTarget(s.Nodes[be])
	s.SetTemplates = map[string][]Template{be: {{Hash: v2hash}}}
	adopt, gate := Unheld(s)
	require.Empty(t, adopt, "at the switch nothing is adopted")
	require.Contains(t, gate, be, "at the switch be is gated")
	s = changedAgain(s, "v3")
	s.Pods = maps.Clone(s.Pods)
	// be's StatefulSet, its template at v2, makes a pod of v2 (replacing be-0).
	made := Pod{Name: be + "-v2", Hash: v2hash, Conditions: map[string]string{string(corev1.PodReady): "False"}}
	s.Pods[be] = []Pod{made}

	// Own oracle: be was released for v1 only; a pod of any other target
	// rolls it; it may start only once fe1 and fe2 (its upgrade
	// predecessors) are Ready on their target.
	require.NotContains(t, []string{v1hash, StampedTarget(s.Nodes[be])}, v2hash, "v2 is neither v1 nor be's current target")
	require.False(t, s.converged(fe1) && s.converged(fe2), "fe1 and fe2 are not both on target")

	// The pod webhook, on the whole tenant.
	ok, _ := PodMayStart(s, be, made.Hash)
	assert.False(t, ok, "the pod webhook admits %s (target v2, never released for be) schedulable while fe1 and fe2 are not on target", made.Name)
	// The pod webhook's read by name (MayStartByName).
	scope, ok := PodScope(s.withNodes(nil), be)
	require.True(t, ok, "be's pods have a scope to read by name")
	names := map[string]bool{}
	for _, r := range scope {
		names[r] = true
	}
	read := s.withNodes(names).WithWorkloadOf(s, PodWorkloadScope(scope, be))
	assert.False(t, PodsMayStartByName(read, be) && !read.AwaitsRelease(be, made.Hash), "the read by name (scope %v) admits %s schedulable", scope, made.Name)
	// The plan and the release guard, for the same pod created held.
	s.Pods[be] = []Pod{{Name: made.Name, Hash: v2hash, Conditions: made.Conditions, Gates: []string{v2alpha1.GateSequencer}}}
	d := decisionOf(t, Plan(s), be)
	assert.NotContains(t, d.PodsToRelease, made.Name, "Plan lets %s (v2, never released) go while be is gated for v3 and fe1, fe2 are not on target: %s", made.Name, d.Condition.Message)
	stands, _ := ReleaseStands(s, be, made.Name)
	assert.False(t, stands, "the release guard lets %s go", made.Name)
}

// The same hole, reverted: be gated for v2 (never released), its
// StatefulSet template moved to v2 (the switch, or an operator rolling a
// gated node) and its v2 pod held for be's release. The user reverts be
// to v1 (stamped v1 = released v1; the webhook gates it for the change).
// The held v2 pod is no longer made for the node's target, yet still for
// one it was never released for: let go, be would run v2 — a target it
// no longer wants — before anything ordered it.
func TestAPodHeldForItsNodesReleaseIsNotLetGoWhenTheChangeIsReverted(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(100)
	be := w.name("be")
	v1hash := StampedTarget(w.nodes[be])
	w.setVersion(v2, "be", "fe1", "fe2")
	v2hash := StampedTarget(w.nodes[be])
	s := w.snapshot()
	s.Pods = maps.Clone(s.Pods)
	s.SetTemplates = map[string][]Template{be: {{Hash: v2hash}}}
	s.Pods[be] = []Pod{{Name: be + "-v2", Hash: v2hash, Conditions: map[string]string{string(corev1.PodReady): "False"}, Gates: []string{v2alpha1.GateSequencer}}}
	require.True(t, s.AwaitsRelease(be, v2hash), "the v2 pod awaits be's release")
	// Reverted to v1 through the webhook: gated, stamped v1.
	s = regated(s, be, v1, v1hash)
	require.Equal(t, v1hash, ReleasedTarget(s.Nodes[be]), "be was released for v1")
	d := decisionOf(t, Plan(s), be)
	assert.NotContains(t, d.PodsToRelease, be+"-v2", "Plan lets be's v2 pod go although be was never released for v2 (released %s, stamped %s): %s", v1hash, v1hash, d.Condition.Message)
}

// Own oracle (DESIGN §4 "change to all": FE1, FE2, BE; §9: switching to
// enforce releases nothing out of order): a pod made for the node's
// current target, which the node is not released for, rolls the node and
// must wait for the node's release — whether or not that target was
// released once before. A change to all that reverts v2 to v1 (v1 in
// be's rollout history) is left ungated by audit; at the switch the
// operator has moved be's template to v1 and the StatefulSet makes a v1
// pod. be has no provisioning predecessor, so the pod rule alone lets it
// start: be runs v1 before fe1 and fe2 are on it.
func TestAPodMadeForARevertToATargetInTheNodesHistoryWaitsForTheNodesRelease(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(100)
	w.setVersion(v2, "be", "fe1", "fe2")
	w.run(200)
	be, fe1, fe2 := w.name("be"), w.name("fe1"), w.name("fe2")
	w.setVersion(v1, "be", "fe1", "fe2") // the revert, admitted in audit below
	s := asAuditLeftIt(w.snapshot())
	v1hash, v2hash := StampedTarget(s.Nodes[be]), ReleasedTarget(s.Nodes[be])
	require.NotEqual(t, v1hash, v2hash, "be is stamped for another target than it is released for")
	require.True(t, slices.ContainsFunc(HistoryIn(s.Nodes[be]), func(r RolloutRecord) bool { return r.Target == v1hash }), "v1 is in be's history: %v", HistoryIn(s.Nodes[be]))
	require.False(t, s.converged(fe1) || s.converged(fe2), "fe1 and fe2 are not on the reverted target yet")
	// At the switch nothing of v1 runs: be is one to gate.
	adopt, gate := Unheld(s)
	require.Empty(t, adopt, "at the switch nothing is adopted")
	require.Contains(t, gate, be, "at the switch be is gated")
	// Before the gate lands, the operator moves be's template to v1 and
	// the StatefulSet replaces be-0 with a pod of v1.
	s.Pods = maps.Clone(s.Pods)
	s.SetTemplates = map[string][]Template{be: {{Hash: v1hash}}}
	made := Pod{Name: be + "-0", Hash: v1hash, Conditions: map[string]string{string(corev1.PodReady): "False"}}
	s.Pods[be] = []Pod{made}
	ok, _ := PodMayStart(s, be, v1hash)
	assert.False(t, ok, "the pod webhook admits %s (be's current target, not released: released %s) schedulable before fe1 and fe2 are on it", made.Name, v2hash)
	// Gated at the switch, with the pod created held: the plan must not let it go.
	s.Nodes = maps.Clone(s.Nodes)
	g := s.Nodes[be].DeepCopyObject().(v2alpha1.Node)
	g.NodeSpec().AddGate(v2alpha1.GateSequencer)
	s.Nodes[be] = g
	s.Pods[be] = []Pod{{Name: made.Name, Hash: v1hash, Conditions: made.Conditions, Gates: []string{v2alpha1.GateSequencer}}}
	d := decisionOf(t, Plan(s), be)
	assert.False(t, slices.Contains(d.PodsToRelease, made.Name) && d.Gated, "Plan lets %s go while be stays gated for %s: %s", made.Name, v1hash, d.Condition.Message)
	stands, _ := ReleaseStands(s, be, made.Name)
	assert.False(t, stands, "the release guard lets %s go", made.Name)
}

// revertedTenant is be, fe1 and fe2 rolled from v1 to v2, then reverted to
// v1 in audit (ungated, v1 in their rollout history), and be's stamped and
// released target hashes.
func revertedTenant(t *testing.T) (*world, *Snapshot, string, string) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(100)
	w.setVersion(v2, "be", "fe1", "fe2")
	w.run(200)
	w.setVersion(v1, "be", "fe1", "fe2")
	s := asAuditLeftIt(w.snapshot())
	be := s.Nodes[w.name("be")]
	return w, s, StampedTarget(be), ReleasedTarget(be)
}

func TestAwaitsRelease(t *testing.T) {
	w, s, current, released := revertedTenant(t)
	be := w.name("be")
	require.NotEqual(t, current, released)
	require.True(t, slices.ContainsFunc(HistoryIn(s.Nodes[be]), func(r RolloutRecord) bool { return r.Target == current }), "v1 is in be's history")
	withNode := func(edit func(n v2alpha1.Node)) *Snapshot {
		out := *s
		out.Nodes = maps.Clone(s.Nodes)
		n := s.Nodes[be].DeepCopyObject().(v2alpha1.Node)
		edit(n)
		out.Nodes[be] = n
		return &out
	}
	releasedForCurrent := withNode(func(n v2alpha1.Node) { setAnnotation(n, v2alpha1.AnnotationReleasedTarget, current) })
	down := withNode(func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
	for _, tc := range []struct {
		name string
		snap *Snapshot
		hash string
		want bool
	}{
		{"a pod of the node's current target, not released, waits, though its history records it", s, current, true},
		{"a pod of a target the node was never released for waits", s, "never-released", true},
		{"a pod of the target the node is released for goes by the pod rule", s, released, false},
		{"a pod without a target-hash label goes by the pod rule", s, "", false},
		{"released for its current target, a node's pods go by the pod rule, even of a target never released", releasedForCurrent, "never-released", false},
		{"a node taken down holds nothing of its own", down, current, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, tc.snap.AwaitsRelease(be, tc.hash))
			if tc.want {
				ok, why := PodMayStart(tc.snap, be, tc.hash)
				assert.False(t, ok)
				assert.Contains(t, why, "never released for wait for "+be+"'s release")
			}
		})
	}
}
