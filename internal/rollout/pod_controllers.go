package rollout

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// missingPods returns, by node name, how many pods the StatefulSets of the
// node's pods (as their controller owner reference names them, by UID) want
// beyond those that exist: a node whose StatefulSet is creating its pods
// one by one, or replacing one, has all its existing pods Ready long before
// it is. Pods of any other controller are taken as they are: a ReplicaSet's
// spec.replicas says nothing of its Deployment's rollout, which scales it
// up as it goes. So are pods of a StatefulSet not in sets (one deleted, or
// created again under another UID: its pods are being deleted or adopted).
// A StatefulSet owning pods of several nodes lacks, for each of them, what
// it lacks in all. A StatefulSet that owns none of the pods but whose pod
// template names a node of nodes (express.medallia.com/node) wants all its
// replicas: its pods are gone for a moment (deleted, their successors not
// created yet) or not created yet — the node comes back by itself, it does
// not need a release to.
func missingPods(pods []*corev1.Pod, sets []appsv1.StatefulSet, nodes map[string]v2alpha1.Node) map[string]int {
	want := make(map[types.UID]int, len(sets))
	for _, sts := range sets {
		want[sts.UID] = int(ptr.Deref(sts.Spec.Replicas, 1))
	}
	have := map[types.UID]map[string]int{} // StatefulSet → node name → its pods that exist
	for _, pod := range pods {
		ref := metav1.GetControllerOf(pod)
		node := pod.Labels[v2alpha1.LabelNode]
		if ref == nil || ref.APIVersion != appsv1.SchemeGroupVersion.String() || ref.Kind != "StatefulSet" {
			continue
		}
		if _, ok := want[ref.UID]; !ok {
			continue
		}
		if have[ref.UID] == nil {
			have[ref.UID] = map[string]int{}
		}
		have[ref.UID][node]++
	}
	missing := map[string]int{}
	for uid, owned := range have {
		total := 0
		for _, n := range owned {
			total += n
		}
		if short := want[uid] - total; short > 0 {
			for node := range owned {
				missing[node] += short
			}
		}
	}
	for _, sts := range sets {
		node := sts.Spec.Template.Labels[v2alpha1.LabelNode]
		if _, ours := nodes[node]; !ours || have[sts.UID] != nil || sts.DeletionTimestamp != nil {
			continue
		}
		if want := want[sts.UID]; want > 0 {
			missing[node] += want
		}
	}
	return missing
}
