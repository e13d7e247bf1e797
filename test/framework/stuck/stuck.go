// Package stuck keeps chosen Express nodes' builds from becoming Ready, for
// as long as a test needs, with no timing assumption: a node stuck has its
// next pod template written with controlplane.HoldReadyAnnotation by the
// simulated Express operator (expressoperator.Operator.Stuck), which KWOK's
// pod-ready stage does not match, so its new pods run and stay not Ready
// until the test lets them go.
package stuck

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// Builds are the nodes whose next build never becomes Ready. The zero
// value holds none.
type Builds struct{ nodes sync.Map }

// Of reports whether node n's next build is stuck: the operator's Stuck.
func (b *Builds) Of(n v2alpha1.Node) bool {
	_, ok := b.nodes.Load(n.GetNamespace() + "/" + n.GetName())
	return ok
}

// Stick makes the next build of node name in ns one that runs and never
// becomes Ready.
func (b *Builds) Stick(ns, name string) { b.nodes.Store(ns+"/"+name, true) }

// Unstick lets node name's held pods become Ready: the hold goes from every
// pod of the node now, and the operator writes no hold for its later ones.
func (b *Builds) Unstick(t *testing.T, c client.Client, ns, name string) {
	t.Helper()
	b.nodes.Delete(ns + "/" + name)
	var list corev1.PodList
	require.NoError(t, c.List(context.Background(), &list, client.InNamespace(ns), client.MatchingLabels{v2alpha1.LabelNode: name}))
	for i := range list.Items {
		p := &list.Items[i]
		if _, held := p.Annotations[controlplane.HoldReadyAnnotation]; held {
			patch := client.MergeFrom(p.DeepCopy())
			delete(p.Annotations, controlplane.HoldReadyAnnotation)
			require.NoError(t, client.IgnoreNotFound(c.Patch(context.Background(), p, patch)))
		}
	}
}
