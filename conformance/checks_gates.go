package conformance

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// change is one kind of target change the kit makes.
type change struct {
	what string
	edit func(u *unstructured.Unstructured)
}

// changes are a version change, a config-only change and a change to a
// field the operator does not act on, each to a value of its own (n).
func (p *probe) changes3(n int) []change {
	return []change{
		{"a version change", func(u *unstructured.Unstructured) { setField(u, p.cfg.Versions[n%2], "expressVersion") }},
		{"a config-only change (spec.configChangeset)", func(u *unstructured.Unstructured) {
			setField(u, fmt.Sprintf("conformance-config-%d", n), "configChangeset")
		}},
		{fmt.Sprintf("a change to spec.%s, a field the operator does not act on", p.cfg.UnactedField), func(u *unstructured.Unstructured) {
			setField(u, fmt.Sprintf("conformance-%d", n), p.unacted()...)
		}},
	}
}

// podState is what the kit remembers of a pod to tell whether it was
// replaced or restarted.
type podState struct {
	name     string
	restarts int32
}

func podStates(pods []corev1.Pod) map[string]podState {
	out := map[string]podState{}
	for _, p := range pods {
		var restarts int32
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
		out[string(p.UID)] = podState{p.Name, restarts}
	}
	return out
}

// templates returns, by StatefulSet name, the pod templates of the node's
// StatefulSets, and how many replicas each wants.
func templates(sets []appsv1.StatefulSet) map[string]setTemplate {
	out := map[string]setTemplate{}
	for _, s := range sets {
		out[s.Name] = setTemplate{s.Spec.Template, ptrValue(s.Spec.Replicas, 1)}
	}
	return out
}

// setTemplate is a StatefulSet's pod template and the replicas it wants.
type setTemplate struct {
	template corev1.PodTemplateSpec
	replicas int32
}

// sameTemplate reports whether two pod templates make the same pods: their
// labels, annotations and spec, compared whole (an image held back behind a
// partition is a rollout too).
func sameTemplate(a, b corev1.PodTemplateSpec) bool {
	return equality.Semantic.DeepEqual(a, b)
}

// templateChange says what of a pod template changed from a to b: its
// labels, its annotations, its spec.
func templateChange(a, b corev1.PodTemplateSpec) string {
	var parts []string
	if !maps.Equal(a.Labels, b.Labels) {
		parts = append(parts, fmt.Sprintf("labels %v → %v", a.Labels, b.Labels))
	}
	if !maps.Equal(a.Annotations, b.Annotations) {
		parts = append(parts, fmt.Sprintf("annotations %v → %v", a.Annotations, b.Annotations))
	}
	if !equality.Semantic.DeepEqual(a.Spec, b.Spec) {
		parts = append(parts, "its pod spec (containers, images, volumes or the like)")
	}
	return strings.Join(parts, "; ")
}

// checkGatesHold rolls a node out, holds it with a gate of another name,
// and makes three kinds of change, each watched for the hold window; then
// lifts the gate, and the node must roll out its latest target.
func checkGatesHold(ctx context.Context, p *probe) error {
	if err := p.reactsAfter(ctx, "the node's creation", func() error {
		_, err := p.create(ctx, p.cfg.Versions[0], nil)
		return err
	}); err != nil {
		return err
	}
	if err := p.waitRolled(ctx, "the node's first rollout"); err != nil {
		return err
	}
	if _, err := p.update(ctx, addGate); err != nil {
		return err
	}
	for _, c := range p.changes3(1) {
		if err := p.holds(ctx, c); err != nil {
			return err
		}
	}
	if err := p.holdsRevision(ctx); err != nil {
		return err
	}
	if err := p.lifts(ctx, "the gate lifted after three changes"); err != nil {
		return err
	}
	if err := p.waitRolled(ctx, "once the gate was lifted"); err != nil {
		return err
	}
	return p.provisionsNothingGated(ctx)
}

// holdsRevision makes a revision change (spec.deploymentRevision) to the
// gated node, watched for the hold window, and then puts the revision back
// as it was: the kit knows no revision the operator could roll to (Config
// names versions only), so this change is one to hold, never one to roll.
// An operator may deploy a revision on a path of its own, apart from a
// version's.
func (p *probe) holdsRevision(ctx context.Context) error {
	u, err := p.get(ctx)
	if err != nil {
		return err
	}
	was, had, _ := unstructured.NestedString(u.Object, "spec", "deploymentRevision")
	revision := change{"a revision change (spec.deploymentRevision)", func(u *unstructured.Unstructured) {
		setField(u, fmt.Sprintf("conformance-revision-%d", p.changes), "deploymentRevision")
	}}
	if err := p.holds(ctx, revision); err != nil {
		return err
	}
	_, err = p.update(ctx, func(u *unstructured.Unstructured) {
		if had {
			setField(u, was, "deploymentRevision")
		} else {
			unstructured.RemoveNestedField(u.Object, "spec", "deploymentRevision")
		}
	})
	return err
}

// stillGated says, for a node the operator did not act on, that the kit
// never read it ungated (letGo zero): the operator was never seen free to
// act, which is not its failure. It names the gates the node carries now
// and, where express-sequencer's is one, what its PrerequisitesReady
// condition says (of an older generation, if so).
func (p *probe) stillGated(ctx context.Context, letGo time.Time) string {
	if !letGo.IsZero() {
		return ""
	}
	out := ": the kit never read it without a rollout gate, so the operator was never seen free to act (not the operator's failure)"
	read, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	u, err := p.get(read)
	if err != nil || len(gates(u)) == 0 {
		return out
	}
	out += fmt.Sprintf("; it carries %s", strings.Join(gates(u), ", "))
	if c := condition(u, v2alpha1.ConditionPrerequisitesReady); c != nil && slices.Contains(gates(u), v2alpha1.GateSequencer) {
		out += fmt.Sprintf("; express-sequencer's %s says %s: %s", v2alpha1.ConditionPrerequisitesReady, c.Reason, c.Message)
		if c.ObservedGeneration != u.GetGeneration() {
			out += fmt.Sprintf(" (of generation %d; the node is at %d)", c.ObservedGeneration, u.GetGeneration())
		}
	}
	return out
}

// lifts removes the kit's gate from the node, which the operator must then
// act on promptly (reactsAfter).
func (p *probe) lifts(ctx context.Context, what string) error {
	return p.reactsAfter(ctx, what, func() error {
		_, err := p.update(ctx, removeGate)
		return err
	})
}

// provisionsNothingGated checks the other half of the rule: a gated node is
// not (re)provisioned. The node is taken down (up: false, which may
// proceed), gated, and brought back up with a version change: no pod over
// the hold window; a node created with a gate gets none either. Once the
// gate is lifted, each is provisioned, so that the watch was not of an
// operator that provisions nothing.
func (p *probe) provisionsNothingGated(ctx context.Context) error {
	if _, err := p.update(ctx, func(u *unstructured.Unstructured) { setField(u, false, "up") }); err != nil {
		return err
	}
	if err := p.waitScaledDown(ctx); err != nil {
		return err
	}
	if _, err := p.update(ctx, addGate); err != nil {
		return err
	}
	up := change{"up: true with a version change (the node brought back up)", func(u *unstructured.Unstructured) {
		setField(u, true, "up")
		setField(u, p.cfg.Versions[0], "expressVersion")
	}}
	if err := p.holds(ctx, up); err != nil {
		return err
	}
	if err := p.lifts(ctx, "the gate lifted from the node brought back up"); err != nil {
		return err
	}
	if err := p.waitRolled(ctx, "brought back up, once the gate was lifted"); err != nil {
		return err
	}
	// Named to fit no node key: it takes no default prerequisites and has
	// no place in the tenant's default orders, so that once the kit's gate
	// is lifted nothing but the operator stands between it and its pods.
	fe := p.sibling("gated")
	defer fe.delete(context.WithoutCancel(ctx))
	if err := fe.holdsAfter(ctx, "its creation with a rollout gate", func() error {
		_, err := fe.create(ctx, p.cfg.Versions[0], addGate)
		return err
	}); err != nil {
		return err
	}
	if err := fe.lifts(ctx, "the gate lifted from the node created with it"); err != nil {
		return err
	}
	if err := fe.waitRolled(ctx, "created with a gate, once the gate was lifted"); err != nil {
		return err
	}
	// A Frontend's rollout under a gate, as the Backend's above: an
	// operator reconciles each kind apart, and may honour the gates on one
	// kind's rollout path and not the other's. The two nodes carry the
	// change's rollout-id, as a chart's render would: nodes of a tenant
	// that disagree on it hold express-sequencer's release (a change
	// landing).
	if _, err := fe.update(ctx, addGate); err != nil {
		return err
	}
	p.rolloutID, fe.rolloutID = "conformance-frontend-change", "conformance-frontend-change"
	if _, err := p.update(ctx, func(*unstructured.Unstructured) {}); err != nil {
		return err
	}
	if err := fe.holds(ctx, fe.changes3(1)[0]); err != nil {
		return err
	}
	if err := fe.lifts(ctx, "the gate lifted from the Frontend after a version change"); err != nil {
		return err
	}
	return fe.waitRolled(ctx, "the Frontend, once the gate was lifted after a version change")
}

// waitScaledDown waits, at most the rollout timeout, until the node has no
// pods.
func (p *probe) waitScaledDown(ctx context.Context) error {
	var left int
	err := poll(ctx, p.cfg.RolloutTimeout, func() (bool, error) {
		pods, err := p.pods(ctx)
		left = len(pods)
		return left == 0, err
	})
	if err != nil {
		return fmt.Errorf("%s not scaled to zero within %s of up: false (%d pods left): %w", p.name, p.cfg.RolloutTimeout, left, err)
	}
	return nil
}

// holds makes change c to the gated node and watches it for the hold
// window (holdsAfter).
func (p *probe) holds(ctx context.Context, c change) error {
	return p.holdsAfter(ctx, c.what, func() error {
		_, err := p.update(ctx, c.edit)
		return err
	})
}

// workload is what the kit remembers of a node's pods and StatefulSets, to
// tell whether the operator acted on it since.
type workload struct {
	pods map[string]podState
	sets map[string]setTemplate
}

// workload reads the node's pods and StatefulSets.
func (p *probe) workload(ctx context.Context) (workload, error) {
	pods, err := p.pods(ctx)
	if err != nil {
		return workload{}, err
	}
	sets, err := p.sets(ctx)
	if err != nil {
		return workload{}, err
	}
	return workload{podStates(pods), templates(sets)}, nil
}

// movedSince says what was done to the node's workload since before was
// read — a pod created, restarted, deleted or gone, a pod template
// changed, a StatefulSet made that wants pods — or "" where nothing was.
func (p *probe) movedSince(ctx context.Context, before workload) (string, error) {
	pods, err := p.pods(ctx)
	if err != nil {
		return "", err
	}
	now := podStates(pods)
	for uid, st := range now {
		was, ok := before.pods[uid]
		switch {
		case !ok:
			return fmt.Sprintf("pod %s (uid %s) created", st.name, uid), nil
		case st.restarts > was.restarts:
			return fmt.Sprintf("pod %s restarted", st.name), nil
		}
	}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil && before.pods[string(pod.UID)].name != "" {
			return fmt.Sprintf("pod %s deleted", pod.Name), nil
		}
	}
	for uid, st := range before.pods {
		if _, ok := now[uid]; !ok {
			return fmt.Sprintf("pod %s (uid %s) gone", st.name, uid), nil
		}
	}
	sets, err := p.sets(ctx)
	if err != nil {
		return "", err
	}
	for name, t := range templates(sets) {
		was, existed := before.sets[name]
		switch {
		case !existed && t.replicas > 0:
			return fmt.Sprintf("StatefulSet %s, wanting %d pods, created", name, t.replicas), nil
		case existed && !sameTemplate(was.template, t.template):
			return fmt.Sprintf("the pod template of StatefulSet %s changed (%s)", name, templateChange(was.template, t.template)), nil
		case existed && was.replicas == 0 && t.replicas > 0:
			return fmt.Sprintf("StatefulSet %s scaled to %d", name, t.replicas), nil
		}
	}
	return "", nil
}

// holdsAfter makes write (what says what it is) to the gated node and
// watches it for the hold window: no pod may be created, deleted or
// restarted, no pod template changed, and no StatefulSet made or scaled up
// that wants pods.
func (p *probe) holdsAfter(ctx context.Context, what string, write func() error) error {
	moved, took, err := p.movesAfter(ctx, write, p.cfg.HoldWindow, nil)
	switch {
	case moved != "":
		return fmt.Errorf("%s at %s, %s after %s to %s, which carried rollout gate %s",
			moved, at(time.Now()), took.Round(time.Millisecond), what, p.name, holdGate)
	case errors.Is(err, errTimedOut):
		return nil // the window passed with nothing made: what the clause asks
	case err != nil:
		return fmt.Errorf("watching %s over the hold window after %s: %w", p.name, what, err)
	}
	return nil
}

// movesAfter makes write to the node and watches it, at most for timeout,
// until its workload moves (movedSince): it returns what moved and when,
// after write; errTimedOut where nothing did.
//
// each, when given, is called at every read that finds nothing moved.
func (p *probe) movesAfter(ctx context.Context, write func() error, timeout time.Duration, each func() error) (string, time.Duration, error) {
	before, err := p.workload(ctx)
	if err != nil {
		return "", 0, err
	}
	if err := write(); err != nil {
		return "", 0, fmt.Errorf("writing %s: %w", p.name, err)
	}
	since := time.Now()
	var moved string
	err = poll(ctx, timeout, func() (bool, error) {
		var err error
		if moved, err = p.movedSince(ctx, before); moved != "" || err != nil || each == nil {
			return moved != "", err
		}
		return false, each()
	})
	return moved, time.Since(since), err
}

// reactsAfter makes write (what says what it is) to the node, which lets
// the operator act on it once no gate is left (express-sequencer's may
// outlast the kit's, for as long as its release takes), and waits, at most
// the rollout timeout, for it to act (movedSince). A hold watched for a
// window shows only that the operator did not act within it: one that
// acts on a node a window or more after it may — a settle time of its own
// — would pass a hold it does not keep. So the clause fails where the
// operator took more than three quarters of the window, counted from when
// the kit first read the node with no gate: its holds are not proven (one
// that acts sooner than that on a change it must hold acts within the
// window, and the hold fails it).
func (p *probe) reactsAfter(ctx context.Context, what string, write func() error) error {
	var letGo time.Time
	moved, _, err := p.movesAfter(ctx, write, p.cfg.RolloutTimeout, func() error {
		if !letGo.IsZero() {
			return nil
		}
		u, err := p.get(ctx)
		if err == nil && len(gates(u)) == 0 {
			letGo = time.Now()
		}
		return err
	})
	if err != nil {
		if gated := p.stillGated(ctx, letGo); gated != "" {
			return fmt.Errorf("%s: %s was not acted on within %s%s: %w", what, p.name, p.cfg.RolloutTimeout, gated, err)
		}
		return fmt.Errorf("%s: the operator did not act on %s within %s: %w", what, p.name, p.cfg.RolloutTimeout, err)
	}
	var took time.Duration // acted before the kit read the node ungated: at once
	if !letGo.IsZero() {
		took = time.Since(letGo)
	}
	if 4*took > 3*p.cfg.HoldWindow {
		return fmt.Errorf("%s: the operator first acted on %s %s after it carried no gate (%s), more than three quarters of the hold window (%s): a hold watched for one window cannot show that it honours the gate rather than acts late; run with a hold window of at least %s",
			what, p.name, took.Round(time.Millisecond), moved, p.cfg.HoldWindow, (4*took/3).Round(time.Second)+time.Second)
	}
	return nil
}
