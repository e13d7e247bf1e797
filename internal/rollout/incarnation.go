package rollout

import (
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// This file tells which workload belongs to a node as it is now, not to an
// earlier object of the same name. A node deleted and created again
// (kubectl replace --force, Argo CD Replace=true,Force=true, helm
// uninstall && install) keeps its name, and its old StatefulSet and pods
// keep the node label — and, for the same spec, the same target hash —
// until the garbage collector removes them (seconds; longer behind an
// operator's finalizer). Counted for the new node, they would make its
// first rollout look complete before it ran, and its dependents go on.
// So a StatefulSet counts for a node only when its owner references lead to
// that node's UID, and a pod only when its controller does (its
// StatefulSet, or the node itself). Where no owner reference names an
// Express node of that name — an operator that sets none, a pod whose
// StatefulSet was not read, a bare pod — the object counts when it was
// created no earlier than the node (to the second, as the API server keeps
// creation times): an earlier object of the same name was created before
// it.

// nodeOwnerVerdict reports whether owner references refs name an Express
// node of node n's name, of either kind, and if so whether one of them is n
// itself (its kind and UID): an object a Frontend of the name owns is not a
// Backend's of the name, whenever either was created.
func nodeOwnerVerdict(refs []metav1.OwnerReference, n v2alpha1.Node) (belongs, said bool) {
	for _, ref := range refs {
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != v2alpha1.GroupVersion.Group || (ref.Kind != v2alpha1.KindBackend && ref.Kind != v2alpha1.KindFrontend) || ref.Name != n.GetName() {
			continue
		}
		said = true
		if ref.Kind == n.NodeKind() && ref.UID == n.GetUID() {
			return true, true
		}
	}
	return false, said
}

// createdNoEarlierThan reports whether an object created at created may
// belong to node n by the time alone: not created in a second before n's.
func createdNoEarlierThan(created metav1.Time, n v2alpha1.Node) bool {
	c := n.GetCreationTimestamp()
	return !created.Before(&c)
}

// setCountsFor reports whether StatefulSet sts makes node n's pods, not an
// earlier node's of the same name.
func setCountsFor(sts *appsv1.StatefulSet, n v2alpha1.Node) bool {
	if belongs, said := nodeOwnerVerdict(sts.OwnerReferences, n); said {
		return belongs
	}
	return createdNoEarlierThan(sts.CreationTimestamp, n)
}

// podCountsFor reports whether pod belongs to node n as it is now: its
// owner references name n, or its controller is a StatefulSet that counts
// for n (setCountsFor; sets are the StatefulSets read, by UID); without an
// owner that can be followed, when it was created no earlier than n.
//
// Where every StatefulSet the pods could belong to was read (setsRead: a
// fresh read), a pod whose controller StatefulSet is not among them
// belongs to none: its StatefulSet is gone, deleted before the garbage
// collector reached the pod (background deletion, kubectl replace --force
// of its node, a node of the other kind of the name deleted). Judged by
// its creation time, such a pod, made up by the old StatefulSet after a
// node of its name was made again, would make the new node Ready with not
// one pod of its own, and its dependents' pods start.
func podCountsFor(pod Pod, n v2alpha1.Node, sets map[types.UID]*appsv1.StatefulSet, setsRead bool) bool {
	if belongs, said := nodeOwnerVerdict(pod.Owners, n); said {
		return belongs
	}
	// Only apps/v1's StatefulSets are read: a pod of another group's
	// StatefulSet (OpenKruise's) is judged by its creation time.
	if uid, ok := controllerSet(pod); ok {
		if sts, ok := sets[uid]; ok {
			return setCountsFor(sts, n)
		}
		if setsRead {
			return false // an orphan the garbage collector has yet to remove
		}
		if sets == nil {
			// A snapshot of the cache, which holds no StatefulSets: the
			// chain cannot be followed, and the pod counts, as a fresh
			// read that found its StatefulSet adopted by n would count
			// it. Judged by its creation time instead, a pod of a
			// StatefulSet the new node adopted would be dropped, the
			// node never Ready on the cache, and a plan that releases
			// nothing never read fresh. Counting it can only make the
			// cache's plan release more, and every release is planned
			// again on the fresh read.
			return true
		}
	}
	return createdNoEarlierThan(pod.Created, n)
}

// setsByUID indexes StatefulSets by UID.
func setsByUID(sets []appsv1.StatefulSet) map[types.UID]*appsv1.StatefulSet {
	out := make(map[types.UID]*appsv1.StatefulSet, len(sets))
	for i := range sets {
		out[sets[i].UID] = &sets[i]
	}
	return out
}

// CurrentPods returns, of each node's pods, those that belong to the node
// as it is now (podCountsFor), given the StatefulSets read (nil for a
// snapshot of the cache: a pod of a StatefulSet then counts unless it is
// supplanted, and any other is judged by its own owner references and
// creation time). SnapshotOf applies the same rule as it reads.
func CurrentPods(pods map[string][]Pod, nodes map[string]v2alpha1.Node, sets []appsv1.StatefulSet) map[string][]Pod {
	var bySet map[types.UID]*appsv1.StatefulSet // nil: the StatefulSets are not known
	if sets != nil {
		bySet = setsByUID(sets)
	}
	out := make(map[string][]Pod, len(pods))
	for name, ps := range pods {
		n := nodes[name]
		var live map[types.UID]bool
		if sets == nil {
			live = liveSets(ps)
		}
		for _, p := range ps {
			if n == nil || !podCountsFor(p, n, bySet, false) || supplanted(p, live) {
				continue
			}
			out[name] = append(out[name], p)
		}
	}
	return out
}

// controllerSet returns the UID of pod p's controller, if it is an apps/v1
// StatefulSet.
func controllerSet(p Pod) (types.UID, bool) {
	for _, ref := range p.Owners {
		if ref.Controller != nil && *ref.Controller && ref.Kind == "StatefulSet" && ref.APIVersion == appsv1.SchemeGroupVersion.String() {
			return ref.UID, true
		}
	}
	return "", false
}

// liveSets returns the apps/v1 StatefulSets (by UID) that control a pod
// of pods not being deleted.
func liveSets(pods []Pod) map[types.UID]bool {
	var out map[types.UID]bool
	for _, p := range pods {
		if uid, ok := controllerSet(p); ok && !p.Deleting {
			if out == nil {
				out = map[types.UID]bool{}
			}
			out[uid] = true
		}
	}
	return out
}

// supplanted reports, in a snapshot of the cache (which holds no
// StatefulSets), whether pod p is being deleted while none of the node's
// live pods (of StatefulSets live) shares its StatefulSet, and some do
// not: the pod of a StatefulSet the node no longer runs on, gone or going
// (its node made again, kubectl replace --force), left Terminating — on a
// lost machine no kubelet confirms it, for as long as the machine is not
// removed. A fresh read finds its StatefulSet gone and counts it for no
// node (podCountsFor); counted here, not Ready, it would hold the cache's
// plan, and a plan that releases nothing is never read fresh. Dropping it
// can only make the cache's plan release more, and every release is
// planned again on a fresh read. A pod being deleted of the StatefulSet the
// node runs on (a roll, a pod deleted) still counts, not Ready, as before.
func supplanted(p Pod, live map[types.UID]bool) bool {
	if !p.Deleting || len(live) == 0 {
		return false
	}
	uid, ok := controllerSet(p)
	return ok && !live[uid]
}

// currentSets returns the StatefulSets that make some node's pods, as
// setCountsFor judges: those whose pod template names a node of nodes and
// count for it, and every other one (no node of the tenant: their pods are
// not the tenant's).
func currentSets(sets []appsv1.StatefulSet, nodes map[string]v2alpha1.Node) []appsv1.StatefulSet {
	out := make([]appsv1.StatefulSet, 0, len(sets))
	for i := range sets {
		if n := nodes[sets[i].Spec.Template.Labels[v2alpha1.LabelNode]]; n != nil && !setCountsFor(&sets[i], n) {
			continue
		}
		out = append(out, sets[i])
	}
	return out
}
