package conformance

import (
	"context"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
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

// templates returns, by StatefulSet name, the labels and annotations of the
// pod templates of the node's StatefulSets.
func templates(sets []appsv1.StatefulSet) map[string][2]map[string]string {
	out := map[string][2]map[string]string{}
	for _, s := range sets {
		out[s.Name] = [2]map[string]string{s.Spec.Template.Labels, s.Spec.Template.Annotations}
	}
	return out
}

// checkGatesHold rolls a node out, holds it with a gate of another name,
// and makes three kinds of change, each watched for the hold window; then
// lifts the gate, and the node must roll out its latest target.
func checkGatesHold(ctx context.Context, p *probe) error {
	if _, err := p.create(ctx, p.cfg.Versions[0], nil); err != nil {
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
	if _, err := p.update(ctx, removeGate); err != nil {
		return err
	}
	return p.waitRolled(ctx, "once the gate was lifted")
}

// holds makes change c to the gated node and watches it for the hold
// window: no pod may be created, deleted or restarted, and no pod template
// changed.
func (p *probe) holds(ctx context.Context, c change) error {
	pods, err := p.pods(ctx)
	if err != nil {
		return err
	}
	sets, err := p.sets(ctx)
	if err != nil {
		return err
	}
	before, tmpl := podStates(pods), templates(sets)
	if _, err := p.update(ctx, c.edit); err != nil {
		return err
	}
	since := time.Now()
	var broke error
	err = poll(ctx, p.cfg.HoldWindow, func() (bool, error) {
		pods, err := p.pods(ctx)
		if err != nil {
			return false, err
		}
		now := podStates(pods)
		for uid, st := range now {
			was, ok := before[uid]
			switch {
			case !ok:
				broke = fmt.Errorf("pod %s (uid %s) created at %s, %s after %s to %s, which carried rollout gate %s",
					st.name, uid, at(time.Now()), time.Since(since).Round(time.Millisecond), c.what, p.name, holdGate)
			case st.restarts > was.restarts:
				broke = fmt.Errorf("pod %s restarted at %s, %s after %s to %s, which carried rollout gate %s",
					st.name, at(time.Now()), time.Since(since).Round(time.Millisecond), c.what, p.name, holdGate)
			}
		}
		for _, pod := range pods {
			if pod.DeletionTimestamp != nil && before[string(pod.UID)].name != "" {
				broke = fmt.Errorf("pod %s deleted at %s, %s after %s to %s, which carried rollout gate %s",
					pod.Name, at(pod.DeletionTimestamp.Time), pod.DeletionTimestamp.Sub(since).Round(time.Millisecond), c.what, p.name, holdGate)
			}
		}
		for uid, st := range before {
			if _, ok := now[uid]; !ok && broke == nil {
				broke = fmt.Errorf("pod %s (uid %s) gone at %s, %s after %s to %s, which carried rollout gate %s",
					st.name, uid, at(time.Now()), time.Since(since).Round(time.Millisecond), c.what, p.name, holdGate)
			}
		}
		sets, err := p.sets(ctx)
		if err != nil {
			return false, err
		}
		for name, t := range templates(sets) {
			if was := tmpl[name]; !maps.Equal(was[0], t[0]) || !maps.Equal(was[1], t[1]) {
				broke = fmt.Errorf("the pod template of StatefulSet %s changed at %s, %s after %s to %s, which carried rollout gate %s: labels %v → %v",
					name, at(time.Now()), time.Since(since).Round(time.Millisecond), c.what, p.name, holdGate, was[0], t[0])
			}
		}
		return broke != nil, nil
	})
	if broke != nil {
		return broke
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	_ = err // the window passed with nothing made: what the clause asks
	return nil
}
