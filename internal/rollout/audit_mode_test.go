package rollout

import (
	"maps"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// asAuditLeftIt is the snapshot as audit mode's webhook leaves a tenant:
// the same, but no node carries the sequencer's gate.
func asAuditLeftIt(s *Snapshot) *Snapshot {
	out := *s
	out.Nodes = map[string]v2alpha1.Node{}
	for name, n := range s.Nodes {
		c := n.DeepCopyObject().(v2alpha1.Node)
		c.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
		out.Nodes[name] = c
	}
	return &out
}

// auditLeftAChangeToAll is a tenant of be, fe1 and fe2 on v1, changed to
// v2 whole in audit mode: every node ungated for a target not released.
func auditLeftAChangeToAll(t *testing.T) (*world, *Snapshot) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(100)
	w.setVersion(v2, "be", "fe1", "fe2")
	return w, asAuditLeftIt(w.snapshot())
}

func TestAuditModeSaysWhatEnforcingWouldHoldAndHoldsNothing(t *testing.T) {
	w, stored := auditLeftAChangeToAll(t)
	view := AuditView(stored)
	assert.Equal(t, map[string]bool{w.name("be"): true, w.name("fe1"): true, w.name("fe2"): true}, view.Virtual)
	for name, n := range stored.Nodes {
		assert.False(t, Gated(n), "the view gated the stored %s", name)
	}
	decisions := AuditDecisions(view, Plan(view))

	be := decisionOf(t, decisions, w.name("be"))
	assert.True(t, be.Gated, "be stays held in the plan's view")
	assert.Equal(t, v2alpha1.ReasonWouldHold, be.Condition.Reason)
	assert.Contains(t, be.Condition.Message, "would hold acme-be: waiting for acme-fe")
	fe1 := decisionOf(t, decisions, w.name("fe1"))
	assert.False(t, fe1.Gated, "fe1 goes first in the upgrade order")
	assert.True(t, Releasing(view, fe1), "its release is recorded")
	assert.Contains(t, fe1.Condition.Message, "audit: nothing held it; enforcing would release it now")
	for _, d := range decisions {
		assert.Empty(t, d.PodsToRelease, "audit lets no pod go: none is held")
	}
}

func TestAuditModeSaysARecoveringNodesHeldPodsAsWhatItWouldHold(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(2, v1)
	w.run(100)
	s := w.snapshot()
	d := Decision{Node: w.name("fe1"), Condition: metav1.Condition{Status: metav1.ConditionFalse, Reason: v2alpha1.ReasonWaitingForPrerequisite, Message: "recovering: new pods held scheduling-gated; waiting for acme-be (Backend) to be Ready"},
		PodsToRelease: []string{"acme-fe1-0"}}
	got := AuditDecisions(AuditView(s), []Decision{d})[0]
	assert.Equal(t, v2alpha1.ReasonWouldHold, got.Condition.Reason)
	assert.Equal(t, "would hold new pods of acme-fe1: recovering: new pods held scheduling-gated; waiting for acme-be (Backend) to be Ready", got.Condition.Message)
	assert.Empty(t, got.PodsToRelease)
}

func TestAfterAuditEnforceAdoptsWhatRollsAndGatesWhatDoesNot(t *testing.T) {
	w, s := auditLeftAChangeToAll(t)
	// The Express operator, free in audit, already rolls fe1.
	fe1 := w.name("fe1")
	require.NotEmpty(t, s.Pods[fe1])
	s.Pods[fe1] = append(slices.Clone(s.Pods[fe1]), Pod{Name: fe1 + "-new", Hash: StampedTarget(s.Nodes[fe1])})
	adopt, gate := Unheld(s)
	assert.Equal(t, []string{fe1}, adopt)
	assert.Equal(t, []string{w.name("be"), w.name("fe2")}, gate)
	_, none := Unheld(w.snapshot())
	assert.Empty(t, none, "a tenant enforce gated itself leaves nothing unheld")

	// Pods without the hash label (the contract's fallback) prove nothing:
	// the version they carry may be the target's before a config change.
	s.Pods[fe1] = append(slices.Clone(s.Pods[fe1][:len(s.Pods[fe1])-1]), Pod{Name: fe1 + "-new", Version: v2})
	adopt, _ = Unheld(s)
	assert.Empty(t, adopt, "no adoption on version labels alone")
}

// A namespace switched from audit to enforce while a change to all nodes
// was admitted ungated (as audit admits it) and not yet started: until the
// sequencer gates fe2 (its reaction time, unbounded while no replica
// leads), the Express operator sees fe2 ungated, moves its StatefulSet
// template to the new target and the StatefulSet makes a pod from it. Let
// start by the provisioning order alone (be and fe1 Ready), that pod would
// roll fe2 before fe1 (DESIGN §4, §9: the switch releases nothing out of
// order). It waits for fe2's own release; neither it nor the template makes
// fe2 one to adopt; and once fe2 is released, it goes.
func TestAfterASwitchToEnforceAPodMadeForANodesUnreleasedTargetWaitsForItsRelease(t *testing.T) {
	w, s := auditLeftAChangeToAll(t)
	fe2 := w.name("fe2")
	target := StampedTarget(s.Nodes[fe2])
	s.Pods = maps.Clone(s.Pods)
	s.Pods[fe2] = append(slices.Clone(s.Pods[fe2][:len(s.Pods[fe2])-1]),
		Pod{Name: fe2 + "-new", Hash: target, Conditions: map[string]string{string(corev1.PodReady): "False"}})
	s.SetTemplates = map[string][]Template{fe2: {{Hash: target}}}
	ok, why := PodsMayStart(s, fe2)
	require.True(t, ok, "the pod rule alone lets fe2's pod start: %s", why)
	assert.True(t, s.AwaitsRelease(fe2, target), "the pod webhook holds fe2's pod made for the target fe2 was not released for")
	assert.False(t, s.AwaitsRelease(fe2, ReleasedTarget(s.Nodes[fe2])), "a pod of the target fe2 was released for is judged by the pod rule")
	assert.False(t, s.AwaitsRelease(fe2, ""), "a pod without a target-hash label is judged by the pod rule")

	s.Pods[fe2][len(s.Pods[fe2])-1].Gates = []string{v2alpha1.GateSequencer}
	adopt, gate := Unheld(s)
	assert.Empty(t, adopt, "neither a held pod nor a template moved to the target makes fe2 one to adopt")
	assert.Contains(t, gate, fe2)

	s.Nodes = maps.Clone(s.Nodes)
	gated := s.Nodes[fe2].DeepCopyObject().(v2alpha1.Node)
	gated.NodeSpec().AddGate(v2alpha1.GateSequencer)
	s.Nodes[fe2] = gated
	d := decisionOf(t, Plan(s), fe2)
	assert.True(t, d.Gated, "fe2 waits for fe1: %s", d.Condition.Message)
	assert.Empty(t, d.PodsToRelease, "fe2's pod made for its target goes before fe2's release")
	stands, _ := ReleaseStands(s, fe2, fe2+"-new")
	assert.False(t, stands, "the release guard lets fe2's pod go before fe2's release")

	released := gated.DeepCopyObject().(v2alpha1.Node)
	released.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
	setAnnotation(released, v2alpha1.AnnotationReleasedTarget, target)
	s.Nodes[fe2] = released
	assert.False(t, s.AwaitsRelease(fe2, target), "released for its target, fe2's pods are judged by the pod rule")
	assert.Contains(t, decisionOf(t, Plan(s), fe2).PodsToRelease, fe2+"-new", "released, fe2's held pod goes")
}

// In audit mode a crashed node's new pods start at once. A pod the pod
// webhook would have created scheduling-gated (WouldHold) is held in the
// plan's view, and the plan says when it would let it go, recorded on the
// pod: no pod is let go, as none is held.
func TestAuditModeSaysWhenItWouldLetARecoveringNodesPodGo(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(100)
	be, fe1 := w.name("be"), w.name("fe1")
	crashed := func(beReady bool) *Snapshot {
		s := asAuditLeftIt(w.snapshot())
		s.Pods = maps.Clone(s.Pods)
		bePods := slices.Clone(s.Pods[be])
		for i := range bePods {
			bePods[i].Conditions = map[string]string{string(corev1.PodReady): map[bool]string{true: "True", false: "False"}[beReady]}
		}
		s.Pods[be] = bePods
		fePods := slices.Clone(s.Pods[fe1])
		require.NotEmpty(t, fePods)
		fePods[0].Conditions = map[string]string{string(corev1.PodReady): "False"}
		fePods[0].WouldHold = true
		s.Pods[fe1] = fePods
		return s
	}

	view := AuditView(crashed(false))
	assert.True(t, view.Pods[fe1][0].HeldBySequencer(), "held in the plan's view")
	d := decisionOf(t, AuditDecisions(view, Plan(view)), fe1)
	assert.Equal(t, v2alpha1.ReasonWouldHold, d.Condition.Reason)
	assert.Contains(t, d.Condition.Message, "would hold new pods of acme-fe1: recovering: new pods held scheduling-gated; waiting for acme-be")
	assert.Empty(t, d.PodsWouldRelease, "not while acme-be is not Ready")

	view = AuditView(crashed(true))
	d = decisionOf(t, AuditDecisions(view, Plan(view)), fe1)
	assert.Equal(t, []string{fePodName(view, fe1)}, d.PodsWouldRelease, "acme-be Ready: the plan would let the pod go")
	assert.Empty(t, d.PodsToRelease, "and lets none go")
	if assert.NotNil(t, d.Event) {
		assert.Contains(t, d.Event.Message, "(audit: enforcing would now remove the scheduling gate from "+fePodName(view, fe1)+")")
	}
}

func fePodName(s *Snapshot, node string) string { return s.Pods[node][0].Name }

// A node the Express operator rolled in audit and finished by the switch
// to enforce — Ready on its target, no pod or template of another left —
// is adopted converged; one still rolling, or not Ready, is adopted
// rolling (AdoptedConverged).
func TestANodeAdoptedReadyOnItsTargetIsAdoptedConverged(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(100)
	w.setVersion(v2, "fe1")
	s := asAuditLeftIt(w.snapshot())
	fe1 := w.name("fe1")
	target := StampedTarget(s.Nodes[fe1])
	require.NotEmpty(t, s.Pods[fe1])
	with := func(ready string, oldLeft bool) *Snapshot {
		out := *s
		out.Pods, out.SetTemplates = maps.Clone(s.Pods), maps.Clone(s.SetTemplates)
		var pods []Pod
		for _, p := range s.Pods[fe1] {
			if oldLeft {
				pods = append(pods, p)
			}
			p.Name, p.Hash = p.Name+"-new", target
			p.Conditions = map[string]string{string(corev1.PodReady): ready}
			pods = append(pods, p)
		}
		out.Pods[fe1] = pods
		if out.SetTemplates == nil {
			out.SetTemplates = map[string][]Template{}
		}
		out.SetTemplates[fe1] = []Template{{Hash: target}}
		return &out
	}
	for _, c := range []struct {
		name      string
		snap      *Snapshot
		converged bool
	}{
		{"a node Ready on its target with nothing of another left is adopted converged", with("True", false), true},
		{"a node still running pods of the target before it is adopted rolling", with("True", true), false},
		{"a node on its target and not Ready is adopted rolling", with("False", false), false},
	} {
		adopt, _ := Unheld(c.snap)
		require.Contains(t, adopt, fe1, "%s: the operator rolled fe1 in audit", c.name)
		assert.Equal(t, c.converged, AdoptedConverged(c.snap, fe1), c.name)
	}
}

// An adoption keeps what the adopted node records of other nodes'
// converged rollouts, as a release does: of a node still there under the
// same UID, not its own nor one made again since.
func TestAnAdoptionKeepsTheConvergedRolloutsItsNodeRecords(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(100)
	s := asAuditLeftIt(w.snapshot())
	be, fe1, fe2 := w.name("be"), w.name("fe1"), w.name("fe2")
	n := s.Nodes[fe1].DeepCopyObject().(v2alpha1.Node)
	ann := maps.Clone(n.GetAnnotations())
	ann[v2alpha1.AnnotationReleasedAfter] = `{"` + be + `":"` + string(s.Nodes[be].GetUID()) + `/2","` +
		fe2 + `":"an-earlier-fe2/4","` + fe1 + `":"` + string(n.GetUID()) + `/3"}`
	n.SetAnnotations(ann)
	s.Nodes = maps.Clone(s.Nodes)
	s.Nodes[fe1] = n
	assert.Equal(t, map[string]string{be: string(s.Nodes[be].GetUID()) + "/2"}, AdoptionRecords(s, fe1))
}

// In audit the Express operator rolls the Backend as soon as a change to
// all lands on it, where enforcing would have gated it behind fe1 and fe2.
// Its new pod starting, the plan on the audit view still holds it behind
// them: the would-have-held is reported once the plan lets it go. Its new
// version failing, the Backend is a crashed node, which goes first by the
// provisioning order — as enforcing would, from that state — and nothing
// is said of it (docs/operations.md, "When the auditor fires").
func TestInAuditABackendRolledFirstIsHeldBehindTheFrontendsUnlessItsNewVersionFails(t *testing.T) {
	for name, c := range map[string]struct {
		failing bool
		held    bool
	}{
		"its new pod starting, it is held behind fe1 and fe2": {held: true},
		"its new pod failing, it goes first":                  {failing: true, held: false},
	} {
		t.Run(name, func(t *testing.T) {
			w, stored := auditLeftAChangeToAll(t)
			be := w.name("be")
			rolled := make([]Pod, len(stored.Pods[be]))
			for i, p := range stored.Pods[be] {
				p.Hash = StampedTarget(stored.Nodes[be])
				p.Conditions = map[string]string{string(corev1.PodReady): string(corev1.ConditionFalse)}
				p.Failing = c.failing
				rolled[i] = p
			}
			s := *stored
			s.Pods = maps.Clone(stored.Pods)
			s.Pods[be] = rolled
			view := AuditView(&s)
			d := decisionOf(t, AuditDecisions(view, Plan(view)), be)
			assert.Equal(t, c.held, d.Gated, "%s: %s", d.Condition.Reason, d.Condition.Message)
			if c.held {
				assert.Contains(t, d.Condition.Message, "would hold acme-be: waiting for acme-fe2")
			} else {
				assert.Contains(t, d.Condition.Message, "by the provisioning order")
			}
		})
	}
}
