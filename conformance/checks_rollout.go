package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// provisioned creates the clause's node at the first version and waits for
// its first rollout.
func (p *probe) provisioned(ctx context.Context) (*unstructured.Unstructured, error) {
	if _, err := p.create(ctx, p.cfg.Versions[0], nil); err != nil {
		return nil, err
	}
	if err := p.waitRolled(ctx, "the node's first rollout"); err != nil {
		return nil, err
	}
	return p.get(ctx)
}

// checkRollsLabelled rolls a version change out and reads the labels of
// the pods and of the pod templates.
func checkRollsLabelled(ctx context.Context, p *probe) error {
	if _, err := p.provisioned(ctx); err != nil {
		return err
	}
	pods, err := p.pods(ctx)
	if err != nil {
		return err
	}
	relabelled, err := p.watchRelabelled(ctx, podStates(pods), p.cfg.Versions[1], "a version change")
	if err != nil {
		return err
	}
	u, err := p.update(ctx, func(u *unstructured.Unstructured) { setField(u, p.cfg.Versions[1], "expressVersion") })
	if err != nil {
		relabelled()
		return err
	}
	err = p.waitRolled(ctx, "a version change")
	if found := relabelled(); found != "" {
		return errors.New(found)
	}
	if err != nil {
		return err
	}
	sets, err := p.sets(ctx)
	if err != nil {
		return err
	}
	want := wantLabels(u)
	found := false
	for _, s := range sets {
		if s.DeletionTimestamp != nil || ptr.Deref(s.Spec.Replicas, 1) == 0 {
			continue
		}
		found = true
		for k, v := range want {
			if got := s.Spec.Template.Labels[k]; got != v { // a label wanted empty may be left off: it reads as empty
				return fmt.Errorf("the pod template of StatefulSet %s has label %s=%q after the rollout, the node's target wants %q (pods the StatefulSet creates again would lack it)", s.Name, k, got, v)
			}
		}
	}
	if !found {
		return fmt.Errorf("no StatefulSet with replicas makes the pods of %s (template label %s=%s)", p.name, v2alpha1.LabelNode, p.name)
	}
	return nil
}

// watchRelabelled watches the node's pods, from now, for one of before
// (by UID) relabelled with express-version version: a change that needs
// its pods replaced (a version change) is rolled by replacing them. The
// sequencer reads a pod's labels as the target it was made for: an old pod
// relabelled reads Ready on the new target, and the node's dependents would
// be released while it still runs the old version. Every change to a pod is
// seen, however soon the pod is replaced. The returned func stops the
// watch and says what it saw ("" when nothing).
func (p *probe) watchRelabelled(ctx context.Context, before map[string]podState, version, what string) (func() string, error) {
	wc, err := client.NewWithWatch(p.cfg.RESTConfig, client.Options{Scheme: p.c.Scheme()})
	if err != nil {
		return nil, err
	}
	w, err := wc.Watch(ctx, &corev1.PodList{}, client.InNamespace(p.ns), client.MatchingLabels{v2alpha1.LabelNode: p.name})
	if err != nil {
		return nil, fmt.Errorf("watching the pods of %s (RBAC watch on pods): %w", p.name, err)
	}
	var mu sync.Mutex
	var found string
	done := make(chan struct{})
	go func() {
		defer close(done)
		for e := range w.ResultChan() {
			pod, ok := e.Object.(*corev1.Pod)
			if !ok {
				continue
			}
			if _, old := before[string(pod.UID)]; !old || pod.Labels[v2alpha1.LabelExpressVersion] != version {
				continue
			}
			mu.Lock()
			if found == "" {
				found = fmt.Sprintf("pod %s (uid %s), made before %s to %s, was relabelled express-version=%s (target-hash %q) at %s: relabelled, not replaced; a pod's labels are the target it was made for, and the sequencer would read it Ready on a version it does not run",
					pod.Name, pod.UID, what, p.name, version, pod.Labels[v2alpha1.LabelTargetHash], at(time.Now()))
			}
			mu.Unlock()
		}
	}()
	return func() string {
		w.Stop()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return found
	}, nil
}

// checkRollsAnyField makes a config-only change, then a change to a field
// the operator does not act on; each must move every pod to the new hash.
func checkRollsAnyField(ctx context.Context, p *probe) error {
	if _, err := p.provisioned(ctx); err != nil {
		return err
	}
	for _, c := range p.changes3(2)[1:] {
		if _, err := p.update(ctx, c.edit); err != nil {
			return err
		}
		if err := p.waitRolled(ctx, c.what); err != nil {
			return err
		}
	}
	return nil
}

// checkStatefulSet reads the node's StatefulSets after its first rollout,
// and again after a version change.
func checkStatefulSet(ctx context.Context, p *probe) error {
	u, err := p.provisioned(ctx)
	if err != nil {
		return err
	}
	sets, err := p.sets(ctx)
	if err != nil {
		return err
	}
	sets = slices.DeleteFunc(sets, func(s appsv1.StatefulSet) bool { return s.DeletionTimestamp != nil })
	if len(sets) != 1 {
		var names []string
		for _, s := range sets {
			names = append(names, s.Name)
		}
		return fmt.Errorf("%d StatefulSets make the pods of %s (%v): the contract asks for one per node", len(sets), p.name, names)
	}
	s := sets[0]
	if s.Name != p.name {
		return fmt.Errorf("StatefulSet %s makes the pods of %s: it is to be named after the node, so that a decision reads it by name", s.Name, p.name)
	}
	ref := metav1.GetControllerOf(&s)
	if ref == nil || ref.UID != u.GetUID() || ref.Kind != u.GetKind() {
		return fmt.Errorf("StatefulSet %s is controlled by %v, not by %s %s (uid %s)", s.Name, ref, u.GetKind(), p.name, u.GetUID())
	}
	if t := s.Spec.UpdateStrategy.Type; t != "" && t != appsv1.RollingUpdateStatefulSetStrategyType {
		return fmt.Errorf("StatefulSet %s has updateStrategy %s: its controller never completes a rollout, so nothing records that the node converged", s.Name, t)
	}
	if ru := s.Spec.UpdateStrategy.RollingUpdate; ru != nil && ptr.Deref(ru.Partition, 0) > 0 {
		return fmt.Errorf("StatefulSet %s rolls with partition %d: its controller completes no rollout past it, so nothing records that the node converged", s.Name, *ru.Partition)
	}
	if err := p.ownedBy(ctx, s); err != nil {
		return err
	}
	u, err = p.update(ctx, func(u *unstructured.Unstructured) { setField(u, p.cfg.Versions[1], "expressVersion") })
	if err != nil {
		return err
	}
	if err := p.waitRolled(ctx, "a version change"); err != nil {
		return err
	}
	hash := u.GetAnnotations()[v2alpha1.AnnotationTargetHash]
	var last appsv1.StatefulSet
	err = poll(ctx, p.cfg.RolloutTimeout, func() (bool, error) {
		sets, err := p.sets(ctx)
		if err != nil || len(sets) == 0 {
			return false, err
		}
		last = sets[0]
		return last.Status.ObservedGeneration == last.Generation && last.Status.CurrentRevision != "" &&
			last.Status.CurrentRevision == last.Status.UpdateRevision && last.Spec.Template.Labels[v2alpha1.LabelTargetHash] == hash, nil
	})
	if err != nil {
		return fmt.Errorf("after the rollout of target %s, StatefulSet %s has currentRevision %q, updateRevision %q, observedGeneration %d of %d, template target-hash %q: its controller never recorded the rollout complete",
			hash, last.Name, last.Status.CurrentRevision, last.Status.UpdateRevision, last.Status.ObservedGeneration, last.Generation, last.Spec.Template.Labels[v2alpha1.LabelTargetHash])
	}
	if last.UID != s.UID {
		return fmt.Errorf("StatefulSet %s was made again for the version change (uid %s, then %s): the contract rolls the node's one StatefulSet; a new one records no rollout of the node's release (released-set-revision names the old uid)",
			s.Name, s.UID, last.UID)
	}
	return p.ownedBy(ctx, last)
}

// ownedBy checks that every pod of the node is controlled by StatefulSet s:
// a pod made otherwise is one a decision reading the StatefulSet's ordinals
// by name does not see.
func (p *probe) ownedBy(ctx context.Context, s appsv1.StatefulSet) error {
	pods, err := p.pods(ctx)
	if err != nil {
		return err
	}
	for _, pod := range pods {
		if ref := metav1.GetControllerOf(&pod); ref == nil || ref.Kind != "StatefulSet" || ref.UID != s.UID {
			return fmt.Errorf("pod %s of %s is controlled by %v, not by StatefulSet %s (uid %s): the contract has the node's one StatefulSet make all its pods", pod.Name, p.name, ref, s.Name, s.UID)
		}
	}
	return nil
}

// checkUpFalse takes the node down, with a version change held by a gate,
// and brings it back up.
func checkUpFalse(ctx context.Context, p *probe) error {
	if _, err := p.provisioned(ctx); err != nil {
		return err
	}
	sets, err := p.sets(ctx)
	if err != nil {
		return err
	}
	before := templates(sets)
	uids := map[string]string{}
	for _, s := range sets {
		uids[s.Name] = string(s.UID)
	}
	if len(uids) == 0 {
		return fmt.Errorf("no StatefulSet makes the pods of %s (template label %s=%s): nothing is there to scale to zero and keep", p.name, v2alpha1.LabelNode, p.name)
	}
	// A change the node has not been let go for is no part of what it
	// ran: taken down, its template stays the record of what it ran, not
	// of the change (an operator that rebuilt it from the spec would have
	// it come back up on the change, ahead of its turn).
	if _, err := p.update(ctx, addGate); err != nil {
		return err
	}
	if err := p.holds(ctx, change{"a version change", func(u *unstructured.Unstructured) { setField(u, p.cfg.Versions[1], "expressVersion") }}); err != nil {
		return err
	}
	if _, err := p.update(ctx, func(u *unstructured.Unstructured) { setField(u, false, "up") }); err != nil {
		return err
	}
	since := time.Now()
	var why string
	kept := func() (bool, error) {
		pods, err := p.pods(ctx)
		if err != nil {
			return false, err
		}
		sets, err := p.sets(ctx)
		if err != nil {
			return false, err
		}
		for name, uid := range uids {
			i := slices.IndexFunc(sets, func(s appsv1.StatefulSet) bool { return s.Name == name })
			switch {
			case i < 0 || sets[i].DeletionTimestamp != nil || string(sets[i].UID) != uid:
				return false, fmt.Errorf("StatefulSet %s deleted or replaced by %s, %s after %s was set up: false: the contract scales it to 0, its template the record of what the node ran",
					name, at(time.Now()), time.Since(since).Round(time.Millisecond), p.name)
			case !sameTemplate(before[name].template, sets[i].Spec.Template):
				return false, fmt.Errorf("the pod template of StatefulSet %s changed by %s, %s after %s, gated with a version change, was set up: false (%s): taking a node down is not a rollout",
					name, at(time.Now()), time.Since(since).Round(time.Millisecond), p.name, templateChange(before[name].template, sets[i].Spec.Template))
			case ptr.Deref(sets[i].Spec.Replicas, 1) != 0:
				why = fmt.Sprintf("StatefulSet %s still wants %d replicas", name, ptr.Deref(sets[i].Spec.Replicas, 1))
				return false, nil
			}
		}
		why = fmt.Sprintf("%d pods of %s left", len(pods), p.name)
		return len(pods) == 0, nil
	}
	err = poll(ctx, p.cfg.RolloutTimeout, kept)
	if err == nil {
		// Down, the StatefulSet stays as it is: watched for the hold
		// window, it is neither deleted, nor made again, nor rolled.
		var broke error
		_ = poll(ctx, p.cfg.HoldWindow, func() (bool, error) {
			down, err := kept()
			switch {
			case err != nil:
				err = fmt.Errorf("once %s was down: %w", p.name, err)
			case !down:
				err = fmt.Errorf("%s, set up: false and scaled to zero, came back up by %s: %s", p.name, at(time.Now()), why)
			}
			broke = err
			return broke != nil, nil
		})
		err = broke
	}
	if err != nil {
		if why != "" && ctx.Err() == nil && errors.Is(err, errTimedOut) {
			return fmt.Errorf("%s not scaled to zero within %s of up: false: %s", p.name, p.cfg.RolloutTimeout, why)
		}
		return err
	}
	if _, err := p.update(ctx, func(u *unstructured.Unstructured) {
		setField(u, true, "up")
		removeGate(u)
	}); err != nil {
		return err
	}
	return p.waitRolled(ctx, "up: true again, its gate lifted")
}
