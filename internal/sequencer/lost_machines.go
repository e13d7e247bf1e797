package sequencer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// lostMachines reads, by name, the Nodes (machines) the pods are bound to,
// and returns those that no longer exist or are not Ready. A machine that
// vanishes takes every pod on it, but the pods' status still says Ready
// until the pod garbage collector deletes them (40 s after the Node object
// is gone), or the node lifecycle controller marks them (its grace period
// after the last heartbeat): a recreated pod of a later node must not
// start before them. The controller marks only Ready False: the pods'
// other conditions (ContainersReady, Initialized, …), which an explicit
// prerequisite may ask for, stay as the lost kubelet left them, so the
// machine of a pod that is not Ready is read too. A machine that cannot be
// read fails the read, whatever pods run on it (taken as lost, its pods
// would meet no condition: more waits, which may make a wait look circular
// and let a node go by the provisioning order on state no one saw). A
// sequencer that may not read Nodes (RBAC get on nodes) logs it once and
// takes the pods as they are. With listAll (the fleet view, whose
// pods run on any machine of the cluster) the Nodes are listed once
// instead.
//
// The pods were read at revision at (0: a reader that gives no revision,
// taken as it is), so each machine is judged as it was then (machineAt):
// a machine NotReady at that revision and Ready when read — back from a
// partition, its kubelet about to report the pods it lost — would
// otherwise make pods Ready that at no moment both were and ran on a Ready
// machine.
func lostMachines(ctx context.Context, r client.Reader, pods []corev1.Pod, listAll bool, at uint64) (map[string]bool, error) {
	var names []string
	seen := map[string]bool{}
	for i := range pods {
		if m := runsOn(&pods[i]); m != "" && !seen[m] {
			seen[m] = true
			names = append(names, m)
		}
	}
	if listAll && len(names) > 0 {
		return listLostMachines(ctx, r, names, at)
	}
	lost := make([]bool, len(names))
	failed := make([]error, len(names))
	var forbidden atomic.Bool
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Go(func() { lost[i], failed[i] = machineLost(ctx, r, name, at, &forbidden) })
	}
	wg.Wait()
	if err := errors.Join(failed...); err != nil {
		return nil, err
	}
	if forbidden.Load() {
		partialReads.WithLabelValues("machines").Inc() // once per read, however many machines
	}
	return namesWhere(names, func(i int) bool { return lost[i] }), nil
}

// namesWhere returns, as a set, the names of names at whose index lost
// holds; nil where none does.
func namesWhere(names []string, lost func(i int) bool) map[string]bool {
	var out map[string]bool
	for i, name := range names {
		if lost(i) {
			if out == nil {
				out = map[string]bool{}
			}
			out[name] = true
		}
	}
	return out
}

// runsOn is the machine pod runs on: "" when it is being deleted (it
// meets no condition already) or not scheduled.
func runsOn(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return ""
	}
	return pod.Spec.NodeName
}

// machineLost reads machine name and reports whether it was gone or not
// Ready at revision at. A GET answers from etcd at once; a machine written
// since at (a heartbeat, a partition's end) is read again as it was at at
// (machineAt), and the read fails where that is not allowed. Listed at at
// from the start, every machine would wait for the API server's cache of
// Nodes, seldom written, to prove itself that fresh. A machine
// gone now is taken as lost. A machine the sequencer may not get is taken
// as not lost: it is logged once per process and forbidden is set.
func machineLost(ctx context.Context, r client.Reader, name string, at uint64, forbidden *atomic.Bool) (bool, error) {
	var m corev1.Node
	err := r.Get(ctx, client.ObjectKey{Name: name}, &m)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case apierrors.IsForbidden(err):
		forbidden.Store(true)
		nodesForbidden.Do(func() {
			log.FromContext(ctx).Error(err, "Taking Express pods as Ready on whatever machine they run: the sequencer may not read Nodes (RBAC get on nodes)")
		})
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading Node %s: %w", name, err)
	}
	if written, err := strconv.ParseUint(m.ResourceVersion, 10, 64); at > 0 && (err != nil || written > at) {
		then, err := machineAt(ctx, r, name, at)
		switch {
		case err != nil:
			return false, err
		case then == nil:
			return true, nil // made since: the pods read on it ran on none then
		}
		m = *then
	}
	return !machineReady(&m), nil
}

// machineAt reads machine name as it was at revision at: a list of that
// name at exactly that revision, which the API server answers from its
// watch cache's snapshot of it (kube-apiserver 1.34 and later) or from
// etcd's. It returns nil where the machine did not exist then.
func machineAt(ctx context.Context, r client.Reader, name string, at uint64) (*corev1.Node, error) {
	var then corev1.NodeList
	err := r.List(ctx, &then, client.MatchingFields{"metadata.name": name}, &client.ListOptions{Raw: &metav1.ListOptions{
		ResourceVersion: strconv.FormatUint(at, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact,
	}})
	switch {
	case apierrors.IsForbidden(err):
		// Judged as it is now, it could make Ready a pod of a machine lost
		// then: the read fails, and is made again (a machine is seldom
		// written while its pods are read).
		return nil, fmt.Errorf("reading Node %s as it was at revision %d, that of the pods on it: the sequencer may not list Nodes (RBAC list on nodes, which this version's ClusterRole grants: upgrade it with the binary); the read is made again: %w", name, at, err)
	case err != nil:
		return nil, fmt.Errorf("reading Node %s as it was at revision %d, that of the pods on it: %w", name, at, err)
	}
	for i := range then.Items {
		if then.Items[i].Name == name {
			return &then.Items[i], nil
		}
	}
	return nil, nil
}

// machineReady reports whether machine m's Ready condition is True.
func machineReady(m *corev1.Node) bool {
	return slices.ContainsFunc(m.Status.Conditions, func(c corev1.NodeCondition) bool {
		return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
	})
}

// listLostMachines lists the Nodes once, at revision at where it is given,
// and returns those of names that are gone or not Ready.
func listLostMachines(ctx context.Context, r client.Reader, names []string, at uint64) (map[string]bool, error) {
	var machines corev1.NodeList
	var opts []client.ListOption
	if at > 0 {
		opts = append(opts, &client.ListOptions{Raw: &metav1.ListOptions{
			ResourceVersion: strconv.FormatUint(at, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact,
		}})
	}
	err := r.List(ctx, &machines, opts...)
	switch {
	case apierrors.IsForbidden(err):
		partialReads.WithLabelValues("machines").Inc()
		nodesForbidden.Do(func() {
			log.FromContext(ctx).Error(err, "Taking Express pods as Ready on whatever machine they run: Nodes may not be listed (RBAC list on nodes)")
		})
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("listing Nodes: %w", err)
	}
	ready := map[string]bool{}
	for i := range machines.Items {
		ready[machines.Items[i].Name] = machineReady(&machines.Items[i])
	}
	return namesWhere(names, func(i int) bool { return !ready[names[i]] }), nil
}

// nodesForbidden logs once per process that Nodes may not be read.
var nodesForbidden sync.Once
