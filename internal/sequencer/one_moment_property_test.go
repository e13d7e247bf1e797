package sequencer_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// propertySeeds is how many random interleavings each property below is
// checked on.
const propertySeeds = 4000

// The whole tenant's fresh read is four lists, each at its own moment; what
// it returns must be the tenant at one revision, no older than the read's
// start, whatever is written between the lists and whenever. Checked on a
// store that answers as the API server does (versionedStore), against every
// revision the read spans.
func TestTheWholeTenantsReadIsTheTenantAtOneRevisionWhateverIsWrittenBetweenItsLists(t *testing.T) {
	spanned := 0
	for seed := range uint64(propertySeeds) {
		store := newVersionedStore(twoFrontendTenant()...)
		store.between = randomWrites(rand.New(rand.NewPCG(seed, 7)), true, 1)
		start := store.now()
		objects, err := sequencer.ReadNamespace(context.Background(), store, "tenant")
		require.NoError(t, err)
		end := store.now()

		got := map[string]string{}
		for _, n := range objects.Nodes {
			got[string(n.NodeKind())+"/"+n.GetName()] = n.GetResourceVersion()
		}
		for _, p := range objects.Pods {
			got["Pod/"+p.Name] = p.ResourceVersion
		}
		for _, s := range objects.StatefulSets {
			got["StatefulSet/"+s.Name] = s.ResourceVersion
		}
		at := slices.IndexFunc(revisions(start, end), func(rev uint64) bool {
			return maps.Equal(got, store.state(rev, "tenant", v2alpha1.LabelNode, "Backend", "Frontend", "Pod", "StatefulSet"))
		})
		require.GreaterOrEqual(t, at, 0, "seed %d: the read (%v) is the tenant at no revision from %d to %d:\n%s", seed, got, start, end, store.written())
		if !maps.Equal(store.state(start, "tenant", v2alpha1.LabelNode, "Backend", "Frontend", "Pod", "StatefulSet"),
			store.state(end, "tenant", v2alpha1.LabelNode, "Backend", "Frontend", "Pod", "StatefulSet")) {
			spanned++
		}
	}
	// The property says something only where the tenant changed while it
	// was read.
	assert.Greater(t, spanned, propertySeeds/2, "reads the tenant changed during")
}

// A pod's read by name (MayStartByName) is many reads, each at its own
// moment. Where it lets a new pod of fe2 start, there must have been one
// revision, from the read's start to its end, at which each of fe2's live
// provisioning predecessors — the Backend and fe1 — was Ready: every pod
// its StatefulSet wants there and Ready. Checked on a store that answers
// as the API server does, with pods crashing, turning Ready, deleted and
// recreated, StatefulSets scaled, nodes brought down and up, deleted and
// created again between any two of its reads.
func TestAPodIsLetStartByNameOnlyWhereItsPredecessorsWereReadyAtOneRevision(t *testing.T) {
	var started, held int
	reasons := map[string]int{}
	defer func() { t.Logf("started %d held %d %v", started, held, reasons) }()
	for seed := range uint64(propertySeeds) {
		world := twoFrontendTenant()
		cache := indexed(fake.NewClientBuilder()).WithObjects(cloned(world)...).Build()
		store := newVersionedStore(world...)
		// The tenant is not as the cache has it, nor always Ready, when
		// the read begins; then one read in 2 to 9 is preceded by a write.
		rnd := rand.New(rand.NewPCG(seed, 11))
		before := randomWrites(rnd, false, 1)
		for range rnd.IntN(5) {
			before(store)
		}
		store.between = randomWrites(rnd, false, 2+int(seed%8))
		store.after = staleReads(rand.New(rand.NewPCG(seed, 13)), 2+int(seed%5))
		start := store.now()
		ok, why, err := sequencer.MayStartByName(context.Background(), cache, store, "tenant", "acme-fe2", defaults.Builtin(), time.Now(), rollout.Grouping{})
		require.NoError(t, err)
		end := store.now()
		if !ok {
			held++
			reasons[why.Label+": "+why.Why]++
			continue
		}
		started++
		require.True(t, why.None())
		at := slices.IndexFunc(revisions(start, end), func(rev uint64) bool {
			return predecessorsReady(store, rev, "acme-be", "acme-fe1")
		})
		require.GreaterOrEqual(t, at, 0, "seed %d: fe2's pod was let start, but at no revision from %d to %d were the Backend and fe1 both Ready or down:\n%s", seed, start, end, store.written())
	}
	// Both answers were given: the property was checked on starts, and
	// the writes made some reads hold.
	assert.Positive(t, started, "pods let start")
	assert.Positive(t, held, "pods held or answered on the whole tenant")
}

// revisions returns from, from+1, … to.
func revisions(from, to uint64) []uint64 {
	out := make([]uint64, 0, to-from+1)
	for r := from; r <= to; r++ {
		out = append(out, r)
	}
	return out
}

// predecessorsReady reports whether, at revision rev, each of nodes that
// exists, is up and not being deleted was Ready: it has a pod, every pod
// of it is Ready and not being deleted, and its StatefulSet (named after
// it) is there and wants no more pods than it has — counted, as a node
// whose StatefulSet replaces one pod, or scales down, serves with the
// pods it has. Written from the operator contract and DESIGN §4, not from
// the planner.
func predecessorsReady(s *versionedStore, rev uint64, nodes ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range nodes {
		var node v2alpha1.Node
		var set *appsv1.StatefulSet
		var pods []*corev1.Pod
		for k := range s.history {
			o := s.at(k, rev)
			if o == nil {
				continue
			}
			switch k.kind.Kind {
			case "Backend", "Frontend":
				if k.name == name {
					node = o.(v2alpha1.Node)
				}
			case "StatefulSet":
				if k.name == name {
					set = o.(*appsv1.StatefulSet)
				}
			case "Pod":
				if o.GetLabels()[v2alpha1.LabelNode] == name {
					pods = append(pods, o.(*corev1.Pod))
				}
			}
		}
		if node == nil || !node.NodeSpec().IsUp() || node.GetDeletionTimestamp() != nil {
			continue
		}
		if set == nil || len(pods) == 0 || len(pods) < int(*set.Spec.Replicas) ||
			slices.ContainsFunc(pods, func(p *corev1.Pod) bool { return !rollout.PodReady(p) }) {
			return false
		}
	}
	return true
}

// twoFrontendTenant is tenant acme in namespace tenant: a Backend whose
// StatefulSet wants two pods, fe1 with one, each Ready on machine-1, and
// fe2, with none yet.
func twoFrontendTenant() []client.Object {
	node := func(n v2alpha1.Node, name string) client.Object {
		n.SetName(name)
		n.SetNamespace("tenant")
		n.NodeSpec().ClusterConfig.ClusterName = "acme"
		return n
	}
	set := func(name string, replicas int32) *appsv1.StatefulSet {
		return &appsv1.StatefulSet{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant", UID: types.UID("set-" + name)},
			Spec: appsv1.StatefulSetSpec{Replicas: ptr.To(replicas), Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v2alpha1.LabelNode: name}},
			}},
			Status: appsv1.StatefulSetStatus{Replicas: replicas},
		}
	}
	machine := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "machine-1"},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	return []client.Object{
		node(&v2alpha1.Backend{}, "acme-be"), node(&v2alpha1.Frontend{}, "acme-fe1"), node(&v2alpha1.Frontend{}, "acme-fe2"),
		set("acme-be", 2), set("acme-fe1", 1),
		podOf("acme-be", 0, 0, corev1.ConditionTrue), podOf("acme-be", 1, 0, corev1.ConditionTrue), podOf("acme-fe1", 0, 0, corev1.ConditionTrue),
		machine,
	}
}

// podOf is pod ordinal of node's StatefulSet, the incarnation-th made, on
// machine-1, Ready as ready says.
func podOf(node string, ordinal, incarnation int, ready corev1.ConditionStatus) *corev1.Pod {
	name := fmt.Sprintf("%s-%d", node, ordinal)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant", UID: types.UID(fmt.Sprintf("uid-%s-%d", name, incarnation)),
			Labels: map[string]string{v2alpha1.LabelNode: node},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: node,
				UID: types.UID("set-" + node), Controller: ptr.To(true)}}},
		Spec:   corev1.PodSpec{NodeName: "machine-1"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
	}
}

// randomWrites returns a between for a versionedStore that makes, before
// one read in writes, a random write to twoFrontendTenant: a pod turning
// Ready or not, deleted or made again, a StatefulSet scaled between one and
// two, the Backend or fe1 brought down or up, fe1 deleted or made again;
// with machines, machine-1 turning Ready or not too. Reads run at once, so
// rnd is shared under a lock.
func randomWrites(rnd *rand.Rand, machines bool, writes int) func(*versionedStore) {
	var mu sync.Mutex
	made := map[string]int{}
	pods := []struct {
		node    string
		ordinal int
	}{{"acme-be", 0}, {"acme-be", 1}, {"acme-fe1", 0}}
	return func(s *versionedStore) {
		mu.Lock()
		defer mu.Unlock()
		if rnd.IntN(writes) != 0 {
			return
		}
		// Pods turn Ready or not most often: four writes in ten.
		kind := rnd.IntN(10)
		switch {
		case kind < 4 || kind == 9 && !machines:
			kind = 0
		case kind < 9:
			kind -= 3
		default:
			kind = 6
		}
		switch kind {
		case 0: // a pod turns Ready or not
			p := pods[rnd.IntN(len(pods))]
			if got, ok := s.current(podOf(p.node, p.ordinal, 0, "")).(*corev1.Pod); ok {
				ready := corev1.ConditionTrue
				if rollout.PodReady(got) {
					ready = corev1.ConditionFalse
				}
				got.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
				s.write(got)
			}
		case 1: // a pod is deleted
			p := pods[rnd.IntN(len(pods))]
			s.remove(podOf(p.node, p.ordinal, 0, ""))
		case 2: // a pod is made again, not Ready yet or Ready at once
			p := pods[rnd.IntN(len(pods))]
			if s.current(podOf(p.node, p.ordinal, 0, "")) == nil {
				name := fmt.Sprintf("%s-%d", p.node, p.ordinal)
				made[name]++
				ready := corev1.ConditionFalse
				if rnd.IntN(2) == 0 {
					ready = corev1.ConditionTrue
				}
				s.write(podOf(p.node, p.ordinal, made[name], ready))
			}
		case 3: // a StatefulSet is scaled
			name := []string{"acme-be", "acme-fe1"}[rnd.IntN(2)]
			if got, ok := s.current(&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant"}}).(*appsv1.StatefulSet); ok {
				replicas := 3 - *got.Spec.Replicas
				got.Spec.Replicas, got.Status.Replicas = ptr.To(replicas), replicas
				s.write(got)
			}
		case 4: // the Backend or fe1 is brought down or up
			var n v2alpha1.Node = &v2alpha1.Backend{}
			name := "acme-be"
			if rnd.IntN(2) == 0 {
				n, name = &v2alpha1.Frontend{}, "acme-fe1"
			}
			n.SetName(name)
			n.SetNamespace("tenant")
			if got, ok := s.current(n).(v2alpha1.Node); ok {
				got.NodeSpec().Up = ptr.To(!got.NodeSpec().IsUp())
				s.write(got)
			}
		case 5: // fe1 is deleted, or made again
			fe1 := &v2alpha1.Frontend{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe1", Namespace: "tenant"}}
			if s.current(fe1) != nil {
				s.remove(fe1)
			} else {
				fe1.Spec.ClusterConfig.ClusterName = "acme"
				s.write(fe1)
			}
		case 6: // machine-1 turns Ready or not
			got := s.current(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "machine-1"}}).(*corev1.Node)
			if got.Status.Conditions[0].Status == corev1.ConditionTrue {
				got.Status.Conditions[0].Status = corev1.ConditionFalse
			} else {
				got.Status.Conditions[0].Status = corev1.ConditionTrue
			}
			s.write(got)
		}
	}
}

// staleReads returns an after for a versionedStore that, after one read
// in every, makes what it just read stale in the way that could let a pod
// start out of order: a pod read Ready crashes, a node read down is
// brought up, fe1 read absent is made. Reads run at once, so rnd is shared
// under a lock.
func staleReads(rnd *rand.Rand, every int) func(*versionedStore, client.Object, client.Object) {
	var mu sync.Mutex
	return func(s *versionedStore, asked, found client.Object) {
		mu.Lock()
		defer mu.Unlock()
		if rnd.IntN(every) != 0 {
			return
		}
		switch got := found.(type) {
		case *corev1.Pod:
			if now, ok := s.current(got).(*corev1.Pod); ok && rollout.PodReady(now) {
				now.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionFalse}}
				s.write(now)
			}
		case v2alpha1.Node:
			if now, ok := s.current(got).(v2alpha1.Node); ok && !now.NodeSpec().IsUp() {
				now.NodeSpec().Up = ptr.To(true)
				s.write(now)
			}
		case nil:
			if fe1, ok := asked.(*v2alpha1.Frontend); ok && fe1.Name == "acme-fe1" && s.current(fe1) == nil {
				fe1.Spec.ClusterConfig.ClusterName = "acme"
				s.write(fe1)
			}
		}
	}
}
