package audit

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	acv2alpha1 "github.com/medallia/express-sequencer/internal/applyconfiguration/api/v2alpha1"
)

// report counts a finding, says it in a Warning Event on the node and
// writes the node's OrderKept condition: one Event and one condition,
// nothing else.
func (a *Auditor) report(ctx context.Context, f Finding) {
	reason := v2alpha1.ReasonOrderViolation
	if f.Kind == KindWouldHaveHeld {
		reason = v2alpha1.ReasonWouldHaveHeld
		wouldHold.Inc()
	} else {
		violations.WithLabelValues(f.Kind).Inc()
	}
	msg := Describe(f)
	a.Log.Info("Rollout out of order", "kind", f.Kind, "node", f.Node.String(), "pod", f.Pod, "message", msg)
	n := v2alpha1.NewNode(f.NodeKind)
	if n == nil {
		return
	}
	n.SetName(f.Node.Name)
	n.SetNamespace(f.Node.Namespace)
	a.mu.Lock()
	uid := a.uid(f.Node)
	a.mu.Unlock()
	n.SetUID(types.UID(uid))
	a.Recorder.Eventf(n, nil, "Warning", reason, "Audit", "%s", msg)
	if a.Conditions != nil {
		if err := a.Conditions.WriteOrderKept(ctx, f, msg); err != nil {
			a.Log.Error(err, "Writing the OrderKept condition", "node", f.Node.String())
		}
	}
}

// uid is the UID of the last version of node k the judge has.
func (a *Auditor) uid(k NodeKey) string {
	if l := a.judge.nodes[k]; l != nil && len(l.revs) > 0 {
		return l.revs[len(l.revs)-1].seen.UID
	}
	return ""
}

// Describe says a finding in words: what started before what.
func Describe(f Finding) string {
	ran := "nothing"
	if len(f.Ran) > 0 {
		short := make([]string, len(f.Ran))
		for i, r := range f.Ran {
			short[i] = Short(r)
		}
		ran = strings.Join(short, ", ")
	}
	switch {
	case f.Recovery:
		held := "for as long as it lasted (the pod was deleted, or the namespace left audit, before the plan would have let it go)"
		if !f.ReleasedAt.IsZero() {
			held = fmt.Sprintf("for %s more, until %s", f.HeldFor.Round(time.Second), f.ReleasedAt.UTC().Format(time.RFC3339))
		}
		return fmt.Sprintf("%s recovered: its new pod %s (created %s) started at once, where express-sequencer would have held it scheduling-gated %s; it would have waited: %s",
			f.Node.Name, f.Pod, f.Started.UTC().Format(time.RFC3339), held, waiting(f.Waiting))
	case f.Kind == KindWouldHaveHeld:
		held := "with no end the plan recorded (its target changed, the node went down or was deleted, or its namespace was switched to enforce and the node gated, before the plan let it go)"
		if !f.ReleasedAt.IsZero() {
			held = fmt.Sprintf("for %s more, until %s", f.HeldFor.Round(time.Second), f.ReleasedAt.UTC().Format(time.RFC3339))
		}
		return fmt.Sprintf("%s's target %s started (pod %s, created %s) while express-sequencer would have held it %s; it would have waited: %s",
			f.Node.Name, Short(f.Target), f.Pod, f.Started.UTC().Format(time.RFC3339), held, waiting(f.Waiting))
	case f.Kind == KindPodWhileGated:
		return fmt.Sprintf("pod %s, of no StatefulSet, was created for target %s (revision %d) while %s was gated (since revision %d), running %s: made by hand or outside the operator contract; it was waiting: %s",
			f.Pod, Short(f.Target), f.CreatedAt, f.Node.Name, f.HeldAt, ran, waiting(f.Waiting))
	default:
		return fmt.Sprintf("pod %s was created for target %s (revision %d) while %s was gated (since revision %d), running %s: the Express operator rolled a gated node; it was waiting: %s",
			f.Pod, Short(f.Target), f.CreatedAt, f.Node.Name, f.HeldAt, ran, waiting(f.Waiting))
	}
}

func waiting(msg string) string {
	if msg == "" {
		return "(no condition yet)"
	}
	return msg
}

// Short shortens a target hash for people; a fallback target is kept whole.
func Short(target string) string {
	if len(target) > 12 && !strings.Contains(target, "=") {
		return target[:12]
	}
	return target
}

// Conditions writes the OrderKept condition by server-side apply, as the
// auditor's own field manager: the sequencer's PrerequisitesReady and the
// Express operator's conditions are left alone.
type Conditions struct {
	Client client.Client
	Clock  interface{ Now() time.Time }
}

// WriteOrderKept applies OrderKept False with the finding's reason.
func (c Conditions) WriteOrderKept(ctx context.Context, f Finding, message string) error {
	reason := v2alpha1.ReasonOrderViolation
	if f.Kind == KindWouldHaveHeld {
		reason = v2alpha1.ReasonWouldHaveHeld
	}
	cond := metav1ac.Condition().WithType(v2alpha1.ConditionOrderKept).WithStatus(metav1.ConditionFalse).
		WithReason(reason).WithMessage(message).WithLastTransitionTime(metav1.NewTime(c.Clock.Now()))
	status := acv2alpha1.NodeStatus().WithConditions(cond)
	if f.NodeKind == v2alpha1.KindBackend {
		return c.Client.Status().Apply(ctx, acv2alpha1.Backend(f.Node.Name, f.Node.Namespace).WithStatus(status),
			client.FieldOwner(v2alpha1.FieldManagerAuditor), client.ForceOwnership)
	}
	return c.Client.Status().Apply(ctx, acv2alpha1.Frontend(f.Node.Name, f.Node.Namespace).WithStatus(status),
		client.FieldOwner(v2alpha1.FieldManagerAuditor), client.ForceOwnership)
}
