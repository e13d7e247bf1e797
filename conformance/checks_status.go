package conformance

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// kitManager is the field manager the kit writes a condition with.
const kitManager = "express-conformance"

// probeCondition is the condition the kit writes on a node's status.
const probeCondition = "ConformanceProbe"

// errNothingToJudge skips a clause whose rule the operator never came near.
var errNothingToJudge = errors.New("nothing to judge")

// checkConditions writes a condition of its own on the node's status by
// server-side apply, rolls a change out, and looks for it again once the
// operator has written the status.
func checkConditions(ctx context.Context, p *probe) error {
	if _, err := p.provisioned(ctx); err != nil {
		return err
	}
	apply := map[string]any{
		"apiVersion": p.gvk().GroupVersion().String(), "kind": p.gvk().Kind,
		"metadata": map[string]any{"name": p.name, "namespace": p.ns},
		"status": map[string]any{"conditions": []any{map[string]any{
			"type": probeCondition, "status": "True", "reason": "Probe", "message": "written by the conformance kit",
			"lastTransitionTime": time.Now().UTC().Format(time.RFC3339), "observedGeneration": int64(1),
		}}},
	}
	data, err := json.Marshal(apply)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(p.gvk())
	u.SetNamespace(p.ns)
	u.SetName(p.name)
	if err := p.c.Status().Patch(ctx, u, client.RawPatch(types.ApplyPatchType, data), client.FieldOwner(kitManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying condition %s to the status of %s: %w", probeCondition, p.name, err)
	}
	applied := conditionFields(u, probeCondition)
	wrote := time.Now().Truncate(time.Second)
	if _, err := p.update(ctx, func(u *unstructured.Unstructured) { setField(u, p.cfg.Versions[1], "expressVersion") }); err != nil {
		return err
	}
	if err := p.waitRolled(ctx, "a version change"); err != nil {
		return err
	}
	// The operator writes its status as it likes: give it the hold window
	// after the rollout to do so.
	var writer string
	var last *unstructured.Unstructured
	err = poll(ctx, p.cfg.HoldWindow, func() (bool, error) {
		n, err := p.get(ctx)
		if err != nil {
			return false, err
		}
		last = n
		for _, m := range n.GetManagedFields() {
			if m.Subresource == "status" && m.Manager != kitManager && m.Manager != v2alpha1.FieldManager && m.Time != nil && !m.Time.Time.Before(wrote) {
				writer = m.Manager
			}
		}
		return writer != "" && !maps.Equal(conditionFields(n, probeCondition), applied), nil
	})
	if err != nil && !errors.Is(err, errTimedOut) {
		return fmt.Errorf("reading %s's status after the rollout: %w", p.name, err)
	}
	if writer == "" {
		return fmt.Errorf("%w: the operator wrote no status of %s while rolling a change out", errNothingToJudge, p.name)
	}
	now := conditionFields(last, probeCondition)
	forger, typ := foreignWriter(last)
	switch {
	case now == nil:
		return fmt.Errorf("condition %s, applied to %s by field manager %s, gone after a status write of field manager %s (by %s): a write that replaces the whole conditions list erases the sequencer's PrerequisitesReady, its release record, the same way",
			probeCondition, p.name, kitManager, writer, at(time.Now()))
	case !maps.Equal(now, applied):
		return fmt.Errorf("condition %s, applied to %s by field manager %s, rewritten after a status write of field manager %s (by %s): %s; the sequencer's PrerequisitesReady is its release record, and its observedGeneration says which release completed: another writer's condition is left as it was",
			probeCondition, p.name, kitManager, writer, at(time.Now()), changedFields(applied, now))
	case forger != "":
		return fmt.Errorf("condition %s of %s is written by field manager %s: %s and %s are express-sequencer's (its release record and the order auditor's verdict), and an operator leaves them alone; one it writes makes the sequencer read a rollout complete that it never released",
			typ, p.name, forger, v2alpha1.ConditionPrerequisitesReady, v2alpha1.ConditionOrderKept)
	}
	return nil
}

// foreignWriter returns a field manager, other than express-sequencer's
// and the kit's, that owns a field of node u's PrerequisitesReady or
// OrderKept condition, and that condition's type; "" when none does.
func foreignWriter(u *unstructured.Unstructured) (string, string) {
	ours := []string{v2alpha1.FieldManager, v2alpha1.FieldManagerGuardedRelease, v2alpha1.FieldManagerAuditor, kitManager}
	for _, m := range u.GetManagedFields() {
		if slices.Contains(ours, m.Manager) || m.FieldsV1 == nil {
			continue
		}
		var fields map[string]any
		if json.Unmarshal(m.FieldsV1.Raw, &fields) != nil {
			continue
		}
		status, _ := fields["f:status"].(map[string]any)
		conds, _ := status["f:conditions"].(map[string]any)
		for _, typ := range []string{v2alpha1.ConditionPrerequisitesReady, v2alpha1.ConditionOrderKept} {
			if _, ok := conds[fmt.Sprintf(`k:{"type":%q}`, typ)]; ok {
				return m.Manager, typ
			}
		}
	}
	return "", ""
}

// conditionFields returns the fields of node u's condition of type typ, as
// stored, each as its JSON text; nil when it has none.
func conditionFields(u *unstructured.Unstructured, typ string) map[string]string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		out := map[string]string{}
		for k, v := range m {
			b, _ := json.Marshal(v)
			out[k] = string(b)
		}
		return out
	}
	return nil
}

// changedFields says which fields of a condition went from was to now.
func changedFields(was, now map[string]string) string {
	keys := maps.Clone(was)
	maps.Copy(keys, now)
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		if was[k] != now[k] {
			out = append(out, fmt.Sprintf("%s %s → %s", k, orAbsent(was[k]), orAbsent(now[k])))
		}
	}
	return strings.Join(out, ", ")
}

func orAbsent(v string) string {
	if v == "" {
		return "(absent)"
	}
	return v
}

// condition returns the node's condition of type typ, nil when it has none.
func condition(u *unstructured.Unstructured, typ string) *metav1.Condition {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		data, _ := json.Marshal(m)
		var out metav1.Condition
		if json.Unmarshal(data, &out) == nil {
			return &out
		}
	}
	return nil
}

// checkRecreatePromptly deletes a pod of the rolled-out node and, once it
// is gone, waits for a Ready replacement. The time is counted from the
// pod's going, not from its deletion: a StatefulSet makes no pod of the
// name again before the old one is gone, and the grace period the pod is
// given to stop is no delay of the operator's.
func checkRecreatePromptly(ctx context.Context, p *probe) error {
	if _, err := p.provisioned(ctx); err != nil {
		return err
	}
	pods, err := p.pods(ctx)
	if err != nil {
		return err
	}
	victim := pods[0]
	if err := p.c.Delete(ctx, &victim); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting pod %s: %w", victim.Name, err)
	}
	deleted := time.Now()
	grace := time.Duration(ptrValue(victim.Spec.TerminationGracePeriodSeconds, 30)) * time.Second
	if err := poll(ctx, grace+p.cfg.RolloutTimeout, func() (bool, error) {
		pods, err := p.pods(ctx)
		return !slices.ContainsFunc(pods, func(q corev1.Pod) bool { return q.UID == victim.UID }), err
	}); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("pod %s of %s deleted at %s, not gone within its grace period (%s) and %s more", victim.Name, p.name, at(deleted), grace, p.cfg.RolloutTimeout)
	}
	gone := time.Now()
	var why string
	err = poll(ctx, p.cfg.RecreateWithin, func() (bool, error) {
		pods, err := p.pods(ctx)
		if err != nil {
			return false, err
		}
		why = ""
		for _, q := range pods {
			if len(q.Spec.SchedulingGates) > 0 {
				why = fmt.Sprintf("pod %s held by scheduling gates %v", q.Name, q.Spec.SchedulingGates)
			}
		}
		ok, w, err := p.rolled(ctx)
		if !ok && why == "" {
			why = w
		}
		return ok, err
	})
	if err != nil && ctx.Err() == nil {
		return fmt.Errorf("pod %s of %s deleted at %s, gone at %s; no Ready replacement within %s of its going: %s", victim.Name, p.name, at(deleted), at(gone), p.cfg.RecreateWithin, why)
	}
	return err
}

// checkFailingPods rolls the node to a version that cannot start and looks
// for a pod of it reported failing, still there a hold window later.
func checkFailingPods(ctx context.Context, p *probe) error {
	if _, err := p.provisioned(ctx); err != nil {
		return err
	}
	u, err := p.update(ctx, func(u *unstructured.Unstructured) { setField(u, p.cfg.FailingVersion, "expressVersion") })
	if err != nil {
		return err
	}
	hash := u.GetAnnotations()[v2alpha1.AnnotationTargetHash]
	var seen corev1.Pod
	err = poll(ctx, p.cfg.RolloutTimeout, func() (bool, error) {
		pods, err := p.pods(ctx)
		if err != nil {
			return false, err
		}
		i := slices.IndexFunc(pods, func(q corev1.Pod) bool { return q.Labels[v2alpha1.LabelTargetHash] == hash && rollout.FailingPod(&q) })
		if i >= 0 {
			seen = pods[i]
		}
		return i >= 0, nil
	})
	if err != nil {
		return fmt.Errorf("no pod of %s on target %s (version %s) reported failing within %s", p.name, hash, p.cfg.FailingVersion, p.cfg.RolloutTimeout)
	}
	// Watched through the window, not looked at once at its end: a pod
	// deleted and made again under its name in between is another pod.
	found := time.Now()
	var gone string
	err = poll(ctx, p.cfg.HoldWindow, func() (bool, error) {
		pod := &corev1.Pod{}
		err := p.c.Get(ctx, client.ObjectKeyFromObject(&seen), pod)
		switch {
		case apierrors.IsNotFound(err):
			gone = "gone"
		case err != nil:
			return false, fmt.Errorf("reading pod %s, reported failing: %w", seen.Name, err)
		case pod.UID != seen.UID:
			gone = "replaced by another pod of its name"
		case pod.DeletionTimestamp != nil:
			gone = "deleted"
		}
		return gone != "", nil
	})
	switch {
	case gone != "":
		return fmt.Errorf("pod %s, reported failing at %s, %s at %s, within %s: a failing pod hidden this way reads as one starting, and the sequencer cannot tell its rollout is stuck",
			seen.Name, at(found), gone, at(time.Now()), p.cfg.HoldWindow)
	case errors.Is(err, errTimedOut):
		return nil // still there, as reported, the whole window
	}
	return err
}

// checkSequencerRelease makes a version change and waits until
// express-sequencer has released it and recorded it complete.
func checkSequencerRelease(ctx context.Context, p *probe) error {
	if _, err := p.provisioned(ctx); err != nil {
		return err
	}
	u, err := p.update(ctx, func(u *unstructured.Unstructured) { setField(u, p.cfg.Versions[1], "expressVersion") })
	if err != nil {
		return err
	}
	if !slices.Contains(gates(u), v2alpha1.GateSequencer) {
		return fmt.Errorf("the version change of %s came back without the gate %s: the sequencer's webhook did not gate it", p.name, v2alpha1.GateSequencer)
	}
	var last *metav1.Condition
	err = poll(ctx, p.cfg.RolloutTimeout, func() (bool, error) {
		n, err := p.get(ctx)
		if err != nil {
			return false, err
		}
		last = condition(n, v2alpha1.ConditionPrerequisitesReady)
		return len(gates(n)) == 0 && last != nil && last.Reason == v2alpha1.ReasonRolloutComplete && last.ObservedGeneration == n.GetGeneration(), nil
	})
	if err != nil {
		return fmt.Errorf("%s not recorded complete within %s of a version change: its %s condition says %v", p.name, p.cfg.RolloutTimeout, v2alpha1.ConditionPrerequisitesReady, last)
	}
	return nil
}
