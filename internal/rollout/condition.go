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

// PrerequisitesCondition returns the node's PrerequisitesReady condition, or nil.
func PrerequisitesCondition(n v2alpha1.Node) *metav1.Condition {
	return meta.FindStatusCondition(n.NodeStatus().Conditions, v2alpha1.ConditionPrerequisitesReady)
}
