package rollout

import (
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// In audit a change to all (v1 → v2) was admitted ungated, and be's
// StatefulSet was moved to a v2 template that no pod of be ran: edited
// (its controller behind, status still on v1's revision) or made again
// under another UID (equal revisions from birth, adopting be's v1 pod).
// The switch to enforce gates be; the chart reverts to v1; be is released
// for v1 (the operator slow), then a change to all to v3 gates every node
// before the operator acts. The StatefulSet then makes a pod of v2 — a
// target be was never released for, neither its current nor in its
// history — while fe1 and fe2 are gated for v3 (DESIGN §4: be follows
// them; §9: the switch releases nothing out of order). The release
// recorded that StatefulSet's generation from its status alone, and the
// pod was taken for a recovery of what be ran: started by the pod rule (be
// has no provisioning predecessor).
func TestAPodOfATemplateItsNodeNeverRanWaitsThoughItsStatefulSetWasUnchangedSinceTheRelease(t *testing.T) {
	for name, moved := range map[string]func(sts *appsv1.StatefulSet, v1hash, v2hash string){
		"its StatefulSet edited, the controller not yet acting on it": func(sts *appsv1.StatefulSet, v1hash, v2hash string) {
			sts.Generation, sts.Status.ObservedGeneration = sts.Generation+1, sts.Generation
			sts.Status.CurrentRevision, sts.Status.UpdateRevision = v1hash, v1hash
		},
		"its StatefulSet made again, adopting the pod": func(sts *appsv1.StatefulSet, _, v2hash string) {
			sts.UID = "sts-made-again"
			sts.Generation, sts.Status.ObservedGeneration = 1, 1
			sts.Status.CurrentRevision, sts.Status.UpdateRevision = v2hash, v2hash
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "acme")
			w.tenant(3, v1)
			w.run(100)
			all := keysOf(3)
			be := w.name("be")
			v1hash := StampedTarget(w.nodes[be])
			w.setVersion(v2, all...)
			setGates(w, false, all...) // audit: admitted ungated
			v2hash := StampedTarget(w.nodes[be])
			sets := func() []appsv1.StatefulSet {
				out := w.statefulSets()
				for i := range out {
					if out[i].Name == be {
						out[i].Spec.Template.Labels[v2alpha1.LabelTargetHash] = v2hash
						moved(&out[i], v1hash, v2hash)
					}
				}
				return out
			}
			snapshot := func() *Snapshot { return w.snapshotOf(sets()) }

			_, gate := Unheld(snapshot())
			require.Contains(t, gate, be, "the switch to enforce gates be")
			for _, g := range gate {
				setGates(w, true, w.key(g))
			}
			w.setVersion(v1, all...) // the revert
			for range 10 {
				if !Gated(w.nodes[be]) {
					break
				}
				w.tick++
				w.now = w.now.Add(time.Second)
				w.sequenceOn(snapshot()) // the operator acts on nothing
			}
			require.False(t, Gated(w.nodes[be]), "be is released for v1")
			require.Equal(t, v1hash, ReleasedTarget(w.nodes[be]))
			w.setVersion("express-e689.160", all...)
			require.True(t, Gated(w.nodes[be]))

			// be's pod made again from the v2 template.
			s := snapshot()
			s.Pods = maps.Clone(s.Pods)
			s.Pods[be] = []Pod{{Name: be + "-0", Hash: v2hash, Version: v2, Conditions: map[string]string{string(corev1.PodReady): "False"}}}
			s.MissingPods = nil
			require.NotEqual(t, v2hash, StampedTarget(s.Nodes[be]))
			for _, r := range HistoryIn(s.Nodes[be]) {
				require.NotEqual(t, v2hash, r.Target, "be was never released for v2")
			}
			ok, why := PodMayStart(s, be, v2hash)
			assert.False(t, ok, "be's pod of v2 waits for be's release; recorded %q",
				s.Nodes[be].GetAnnotations()[v2alpha1.AnnotationReleasedSetRevision])
			t.Log(why)
			s.Pods[be][0].Gates = []string{v2alpha1.GateSequencer}
			d := decisionOf(t, Plan(s), be)
			assert.Empty(t, d.PodsToRelease, "be's held pod of v2 stays held: %s", d.Condition.Message)
		})
	}
}
