package rollout

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// SetCondition puts c into conds, returning whether anything changed. Its
// lastTransitionTime moves to now when the status or the reason changes, so
// that a release is timed from the moment of release (for the progress
// deadline) even when the status stays True.
func SetCondition(conds *[]metav1.Condition, c metav1.Condition, now time.Time) bool {
	cur := meta.FindStatusCondition(*conds, c.Type)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason && cur.Message == c.Message &&
		cur.ObservedGeneration == c.ObservedGeneration {
		return false
	}
	c.LastTransitionTime = metav1.NewTime(now)
	if cur != nil && cur.Status == c.Status && cur.Reason == c.Reason {
		c.LastTransitionTime = cur.LastTransitionTime
	}
	meta.SetStatusCondition(conds, c)
	// SetStatusCondition keeps the old time when the status is unchanged.
	meta.FindStatusCondition(*conds, c.Type).LastTransitionTime = c.LastTransitionTime
	return true
}

// ConditionWriteTestsVersion reports whether the write of d's condition must
// carry the resourceVersion of the node as the plan read it, so that it is
// refused (409 Conflict) if anything wrote the node since. The condition is
// a record of convergence (RolloutComplete, and a recovering node's reasons,
// observed at or after the release): a replica that planned on an older
// state and writes late — frozen after its read, its lease long gone —
// would otherwise replace that record with a reason from before it
// (Released, a progress deadline, a wait), and the node would read as a
// rollout still under way whose held pods may go ahead of its predecessors.
// A RolloutComplete write erases no record (a late one names an older
// generation, which records nothing for a newer release), so it goes
// untested: it is what a pass writes before any release, and must not wait
// on the Express operator's own status writes.
func ConditionWriteTestsVersion(d Decision) bool {
	return d.Condition.Reason != v2alpha1.ReasonRolloutComplete
}

// condition returns the node's PrerequisitesReady condition, or nil.
func condition(n v2alpha1.Node) *metav1.Condition {
	return meta.FindStatusCondition(n.NodeStatus().Conditions, v2alpha1.ConditionPrerequisitesReady)
}
