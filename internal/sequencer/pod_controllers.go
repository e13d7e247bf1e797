package sequencer

import (
	"context"
	"fmt"
	"sync"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// missingPods returns, by node name, how many pods the controllers of the
// node's pods (a StatefulSet or a ReplicaSet, as their controller owner
// reference names it) want beyond those that exist: a node whose
// StatefulSet is creating its pods one by one, or replacing one, has all
// its existing pods Ready long before it is. Each controller is read by
// name straight from the API server (r is not a cache), all at once.
//
// A controller that no longer exists, or exists again under another UID,
// wants nothing of these pods: they are being deleted or adopted. One the
// sequencer may not read (an installation whose RBAC predates this read)
// is logged and its pods taken as they are, as before the read existed.
func missingPods(ctx context.Context, r client.Reader, namespace string, pods []corev1.Pod) (map[string]int, error) {
	type owner struct {
		kind string
		name string
		uid  types.UID
	}
	owned := map[owner]map[string]int{} // controller → node name → its pods that exist
	for i := range pods {
		ref := metav1.GetControllerOf(&pods[i])
		node := pods[i].Labels[v2alpha1.LabelNode]
		if ref == nil || node == "" || ref.APIVersion != appsv1.SchemeGroupVersion.String() || ref.Kind != "StatefulSet" && ref.Kind != "ReplicaSet" {
			continue
		}
		o := owner{kind: ref.Kind, name: ref.Name, uid: ref.UID}
		if owned[o] == nil {
			owned[o] = map[string]int{}
		}
		owned[o][node]++
	}
	missing := map[string]int{}
	var mu sync.Mutex
	var g errgroup.Group
	for o, nodes := range owned {
		g.Go(func() error {
			var obj client.Object
			replicas := func() *int32 { return nil }
			switch o.kind {
			case "StatefulSet":
				sts := &appsv1.StatefulSet{}
				obj, replicas = sts, func() *int32 { return sts.Spec.Replicas }
			default:
				rs := &appsv1.ReplicaSet{}
				obj, replicas = rs, func() *int32 { return rs.Spec.Replicas }
			}
			err := r.Get(ctx, client.ObjectKey{Namespace: namespace, Name: o.name}, obj)
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case apierrors.IsForbidden(err):
				log.FromContext(ctx).Error(err, "Taking the pods as they are: the controller of Express pods may not be read (RBAC get on statefulsets and replicasets)",
					"kind", o.kind, "controller", klog.KRef(namespace, o.name))
				return nil
			case err != nil:
				return fmt.Errorf("reading %s %s/%s, the controller of Express pods: %w", o.kind, namespace, o.name, err)
			}
			if obj.GetUID() != o.uid {
				return nil
			}
			want := 1
			if n := replicas(); n != nil {
				want = int(*n)
			}
			mu.Lock()
			defer mu.Unlock()
			for node, have := range nodes {
				if want > have {
					missing[node] += want - have
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return missing, nil
}

// tenantPods returns the pods of the snapshot's nodes: the namespace may
// hold other tenants, whose controllers this snapshot has no business
// reading.
func (s *Snapshot) tenantPods(pods []corev1.Pod) []corev1.Pod {
	var out []corev1.Pod
	for i := range pods {
		if _, ok := s.Nodes[pods[i].Labels[v2alpha1.LabelNode]]; ok {
			out = append(out, pods[i])
		}
	}
	return out
}
