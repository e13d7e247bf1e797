package rollout

import (
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PodReady, which the fresh reads use to pick the machines whose loss they
// check, takes a pod as Ready exactly where the plan does (PodOf).
func TestAPodIsReadyForTheMachineChecksExactlyWhereThePlanTakesItAsReady(t *testing.T) {
	ready := func(s corev1.ConditionStatus) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodReady, Status: s}
	}
	deleting := metav1.Now()
	for _, c := range []struct {
		name       string
		conditions []corev1.PodCondition
		deleting   bool
		want       bool
	}{
		{"a pod whose Ready condition is True is Ready", []corev1.PodCondition{ready(corev1.ConditionTrue)}, false, true},
		{"a pod whose Ready condition is False is not", []corev1.PodCondition{ready(corev1.ConditionFalse)}, false, false},
		{"a pod whose Ready condition is Unknown is not", []corev1.PodCondition{ready(corev1.ConditionUnknown)}, false, false},
		{"a pod with no Ready condition is not", []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}}, false, false},
		{"a pod being deleted is not, whatever its condition says", []corev1.PodCondition{ready(corev1.ConditionTrue)}, true, false},
		{"a pod with two Ready conditions is as the last says", []corev1.PodCondition{ready(corev1.ConditionTrue), ready(corev1.ConditionFalse)}, false, false},
		{"a pod whose last Ready condition is True is Ready", []corev1.PodCondition{ready(corev1.ConditionFalse), ready(corev1.ConditionTrue)}, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &corev1.Pod{Status: corev1.PodStatus{Conditions: c.conditions}}
			if c.deleting {
				p.DeletionTimestamp = &deleting
			}
			assert.Equal(t, c.want, PodReady(p))
			assert.Equal(t, c.want, PodOf(p).Conditions[string(corev1.PodReady)] == string(corev1.ConditionTrue), "as the plan reads it")
		})
	}
}
