package sequencer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// podReads reads a scoped read's pods by name, and the machines they run
// on, in rounds: each round reads at once every pod and machine wanted
// since the one before, and a pod read on a machine not read yet wants
// that machine for the next.
type podReads struct {
	ns    string
	fresh client.Reader
	// setOf is the index in scope of the node each pod wanted belongs to.
	setOf map[string]int
	// pods are the pods found, by name; foundSets the indexes in scope of
	// the nodes one of them belongs to.
	pods      map[string]*corev1.Pod
	foundSets map[int]bool
	// lost are the machines read, by name: whether each is lost.
	lost map[string]bool
	// failed and forbidden are the machines whose read failed, or which
	// may not be read: said only where a Ready pod read runs on one.
	failed    map[string]error
	forbidden map[string]bool
	// machines are the machines wanted, read or not.
	machines map[string]bool
	// queued and queuedMachines are wanted and not read yet.
	queued, queuedMachines []string
}

func newPodReads(ns string, fresh client.Reader) *podReads {
	return &podReads{ns: ns, fresh: fresh, setOf: map[string]int{}, pods: map[string]*corev1.Pod{}, foundSets: map[int]bool{}, lost: map[string]bool{},
		failed: map[string]error{}, forbidden: map[string]bool{}, machines: map[string]bool{}}
}

// want queues the pod of the given ordinal of node, scope's set-th.
func (r *podReads) want(set int, node string, ordinal int) {
	name := node + "-" + strconv.Itoa(ordinal)
	if _, ok := r.setOf[name]; ok {
		return
	}
	r.setOf[name] = set
	r.queued = append(r.queued, name)
}

// wantMachine queues machine m, unless it was wanted before.
func (r *podReads) wantMachine(m string) {
	if m == "" || r.machines[m] {
		return
	}
	r.machines[m] = true
	r.queuedMachines = append(r.queuedMachines, m)
}

// pending reports whether anything is queued.
func (r *podReads) pending() bool { return len(r.queued)+len(r.queuedMachines) > 0 }

// read reads, at once, everything queued. A pod's read that failed is
// returned; a machine's is kept for lostOf.
func (r *podReads) read(ctx context.Context) error {
	names, machines := r.queued, r.queuedMachines
	r.queued, r.queuedMachines = nil, nil
	pods := make([]corev1.Pod, len(names))
	found := make([]bool, len(names))
	lost := make([]bool, len(machines))
	failed := make([]error, len(machines))
	forbidden := make([]atomic.Bool, len(machines))
	var g errgroup.Group
	for j, name := range names {
		g.Go(func() error {
			err := r.fresh.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: name}, &pods[j])
			switch {
			case apierrors.IsNotFound(err):
				return nil // not created yet, or gone: the StatefulSet says what it wants
			case err != nil:
				return fmt.Errorf("reading pod %s/%s: %w", r.ns, name, err)
			}
			found[j] = true
			return nil
		})
	}
	for k, m := range machines {
		g.Go(func() error {
			lost[k], failed[k] = machineLost(ctx, r.fresh, m, 0, &forbidden[k]) // judged again by the guard
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	for k, m := range machines {
		r.lost[m] = lost[k]
		if failed[k] != nil {
			r.failed[m] = failed[k]
		}
		if forbidden[k].Load() {
			r.forbidden[m] = true
		}
	}
	for j, name := range names {
		if found[j] {
			r.pods[name] = &pods[j]
			r.foundSets[r.setOf[name]] = true
			r.wantMachine(runsOn(&pods[j]))
		}
	}
	return nil
}

// foundOf reports whether a pod of scope's set-th node was read.
func (r *podReads) foundOf(set int) bool { return r.foundSets[set] }

// found returns the pods read, by name.
func (r *podReads) found() []*corev1.Pod {
	out := make([]*corev1.Pod, 0, len(r.pods))
	for _, p := range r.pods {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// lostOf returns the lost machines that pods run on, as lostMachines
// does; every one was read (read queues them). It fails where the read of
// such a machine failed, and counts a partial read where one may not be
// read.
func (r *podReads) lostOf(pods []corev1.Pod) (map[string]bool, error) {
	var out map[string]bool
	var errs []error
	said := map[string]bool{} // a machine that failed is said once, however many pods run on it
	forbidden := false
	for i := range pods {
		m := runsOn(&pods[i])
		switch {
		case m == "":
		case r.failed[m] != nil:
			if !said[m] {
				said[m] = true
				errs = append(errs, r.failed[m])
			}
		case r.forbidden[m]:
			forbidden = true
		case r.lost[m]:
			if out == nil {
				out = map[string]bool{}
			}
			out[m] = true
		}
	}
	if forbidden {
		partialReads.WithLabelValues("machines").Inc() // once per read, however many machines
	}
	return out, errors.Join(errs...)
}
