package rollout

import (
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// What tells that the rollout of a gated node's latest release converged
// (releaseConverged), for fe2 of a settled tenant gated for a change and
// changed back: only a record of that release, not of an earlier one, nor
// a condition the sequencer writes for a node waiting its turn.
func TestWhatTellsThatTheRolloutOfAGatedNodesLatestReleaseConverged(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(200)
	fe2 := w.name("fe2")
	w.setVersion(v2, "fe2")
	w.setVersion(v1, "fe2")
	base := w.nodes[fe2]
	require.True(t, Gated(base))
	releasedAt := stamp(base, v2alpha1.AnnotationReleasedAt)
	require.False(t, releasedAt.IsZero())
	ofRelease := RolloutRecord{Target: ReleasedTarget(base), Released: releasedAt}

	withHistory := func(r RolloutRecord) func(v2alpha1.Node) {
		return func(n v2alpha1.Node) {
			data, err := json.Marshal([]RolloutRecord{r})
			require.NoError(t, err)
			n.GetAnnotations()[v2alpha1.AnnotationRolloutHistory] = string(data)
		}
	}
	withCondition := func(reason string, generation int64) func(v2alpha1.Node) {
		return func(n v2alpha1.Node) {
			n.NodeStatus().Conditions = []metav1.Condition{{Type: v2alpha1.ConditionPrerequisitesReady, Reason: reason, ObservedGeneration: generation}}
		}
	}
	converged, unconverged, earlier, down, unknown := ofRelease, ofRelease, ofRelease, ofRelease, ofRelease
	converged.Converged, unconverged.Converged, down.Converged = ptr.To(true), ptr.To(false), ptr.To(false)
	earlier.Converged, earlier.Released = ptr.To(true), releasedAt.Add(-time.Hour)
	down.Down = true
	gen := releasedGeneration(base)
	for _, c := range []struct {
		name string
		edit []func(v2alpha1.Node)
		want bool
		// noPods: read with no pod of fe2 (its operator took it down).
		noPods bool
	}{
		{"a history record of that release kept converged tells it", []func(v2alpha1.Node){withHistory(converged), withCondition(v2alpha1.ReasonWaitingForPrerequisite, gen+1)}, true, false},
		{"a history record of that release kept with a Ready time tells it", []func(v2alpha1.Node){withHistory(func() RolloutRecord { r := unconverged; r.Ready = releasedAt.Add(time.Minute); return r }()), withCondition(v2alpha1.ReasonWaitingForPrerequisite, gen+1)}, true, false},
		{"a history record of that release kept unconverged does not", []func(v2alpha1.Node){withHistory(unconverged), withCondition(v2alpha1.ReasonWaitingForPrerequisite, gen+1)}, false, false},
		{"a history record of an earlier release of the same target does not", []func(v2alpha1.Node){withHistory(earlier), withCondition(v2alpha1.ReasonWaitingForPrerequisite, gen+1)}, false, false},
		{"a history record of that release kept as the node came back up, unconverged, tells a recovery once its pods are gone", []func(v2alpha1.Node){withHistory(down), withCondition(v2alpha1.ReasonWaitingForPrerequisite, gen+1)}, true, true},
		{"a history record of that release kept as the node came back up does not while the pods it ran are still there", []func(v2alpha1.Node){withHistory(down), withCondition(v2alpha1.ReasonWaitingForPrerequisite, gen+1)}, false, false},
		{"a history record of that release kept by an earlier version, which says nothing of convergence, is taken as that version took it", []func(v2alpha1.Node){withHistory(unknown), withCondition(v2alpha1.ReasonWaitingForPrerequisite, gen+1)}, true, false},
		{"a RolloutComplete condition for that release not overwritten yet tells it", []func(v2alpha1.Node){withHistory(unconverged), withCondition(v2alpha1.ReasonRolloutComplete, gen)}, true, false},
		{"a RolloutComplete condition of an earlier release does not", []func(v2alpha1.Node){withHistory(unconverged), withCondition(v2alpha1.ReasonRolloutComplete, gen-1)}, false, false},
		{"a wait the sequencer writes for the gated node does not", []func(v2alpha1.Node){withHistory(unconverged), withCondition(v2alpha1.ReasonWaitingForPrerequisite, gen)}, false, false},
		{"its own entry in released-after tells it", []func(v2alpha1.Node){withHistory(unconverged), withCondition(v2alpha1.ReasonWaitingForPrerequisite, gen+1), func(n v2alpha1.Node) {
			n.GetAnnotations()[v2alpha1.AnnotationReleasedAfter] = `{"` + fe2 + `":"` + convergenceKey(n) + `"}`
		}}, true, false},
		{"a node adopted before the sequencer (no released generation nor time) kept converged tells it", []func(v2alpha1.Node){func(n v2alpha1.Node) {
			delete(n.GetAnnotations(), v2alpha1.AnnotationReleasedGeneration)
			delete(n.GetAnnotations(), v2alpha1.AnnotationReleasedAt)
			delete(n.GetAnnotations(), v2alpha1.AnnotationReleasedAfter)
		}, withHistory(RolloutRecord{Target: ReleasedTarget(base), Converged: ptr.To(true)}), withCondition(v2alpha1.ReasonWaitingForPrerequisite, gen+1)}, true, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			n := base.DeepCopyObject().(v2alpha1.Node)
			for _, e := range c.edit {
				e(n)
			}
			s := w.snapshot()
			s.Nodes = map[string]v2alpha1.Node{}
			for name, m := range w.nodes {
				s.Nodes[name] = m
			}
			s.Nodes[fe2] = n
			s.SetsConverged = nil
			if c.noPods {
				s.Pods = maps.Clone(s.Pods)
				delete(s.Pods, fe2)
			}
			assert.Equal(t, c.want, s.releaseConverged(fe2))
		})
	}
}
