package sequencer_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
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
// start, whatever is written between the lists and whenever — and only the
// tenant's namespace, only its Express pods — and each machine a pod read
// runs on (Ready or not) must be lost or not as it was at that revision. Checked on a
// store that answers as the API server does (versionedStore), against every
// revision the read spans.
func TestTheWholeTenantsReadIsTheTenantAtOneRevisionWhateverIsWrittenBetweenItsLists(t *testing.T) {
	spanned := 0
	for seed := range uint64(propertySeeds) {
		store := newVersionedStore(append(twoFrontendTenant(), elsewhere()...)...)
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
		machines := map[string]bool{}
		for _, p := range objects.Pods {
			if p.Spec.NodeName != "" && p.DeletionTimestamp == nil {
				machines[p.Spec.NodeName] = objects.LostMachines[p.Spec.NodeName]
			}
		}
		at := slices.IndexFunc(revisions(start, end), func(rev uint64) bool {
			return maps.Equal(got, store.state(rev, "tenant", v2alpha1.LabelNode, "Backend", "Frontend", "Pod", "StatefulSet")) &&
				machinesLostAt(store, rev, machines)
		})
		require.GreaterOrEqual(t, at, 0, "seed %d: the read (%v, machines lost: %v) is the tenant at no revision from %d to %d:\n%s", seed, got, machines, start, end, store.written())
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
			before(store, nil)
		}
		store.between = randomWrites(rnd, false, 2+int(seed%8))
		store.after = staleReads(rand.New(rand.NewPCG(seed, 13)), 2+int(seed%5))
		start := store.now()
		ok, why, err := sequencer.MayStartByName(context.Background(), cache, store, "tenant", "acme-fe2", "", defaults.Builtin(), time.Now(), rollout.Grouping{})
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

// machinesLostAt reports whether each machine of lost was, at revision
// rev, gone or not Ready exactly where lost says it is lost.
func machinesLostAt(s *versionedStore, rev uint64, lost map[string]bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, isLost := range lost {
		m, _ := s.at(s.keyOf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}), rev).(*corev1.Node)
		ready := m != nil && slices.ContainsFunc(m.Status.Conditions, func(c corev1.NodeCondition) bool {
			return c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue
		})
		if isLost == ready {
			return false
		}
	}
	return true
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
// exists, is up and not being deleted was Ready: its StatefulSet (named
// after it, made no earlier than the node: not an earlier node's of the
// same name) is there, the node has a pod of it, every such pod has its
// Ready condition True and is not being deleted, and the StatefulSet wants
// no more pods than it has — counted, as a node whose StatefulSet replaces
// one pod, or scales down, serves with the pods it has. Written from the
// operator contract and DESIGN §4, not from the planner. It knows none of
// what the planner lets go on besides — a rollout under way (§4b), the
// ignore-prerequisites annotation — nor a pod no read by name reaches (an
// ordinal above the StatefulSet's replicas the cache has not seen): the
// cache below knows every pod the world can make.
func predecessorsReady(s *versionedStore, rev uint64, nodes ...string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, name := range nodes {
		var node client.Object
		var up bool
		var set *appsv1.StatefulSet
		var pods []*corev1.Pod
		for k := range s.history {
			o := s.at(k, rev)
			if o == nil {
				continue
			}
			switch k.kind.Kind {
			case "Backend":
				if k.name == name {
					node, up = o, o.(*v2alpha1.Backend).Spec.Up == nil || *o.(*v2alpha1.Backend).Spec.Up
				}
			case "Frontend":
				if k.name == name {
					node, up = o, o.(*v2alpha1.Frontend).Spec.Up == nil || *o.(*v2alpha1.Frontend).Spec.Up
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
		if node == nil || !up || node.GetDeletionTimestamp() != nil {
			continue
		}
		made := node.GetCreationTimestamp()
		if set == nil || set.CreationTimestamp.Before(&made) {
			return false
		}
		var ours int
		for _, p := range pods {
			if ref := metav1.GetControllerOf(p); ref == nil || ref.UID != set.UID {
				continue
			}
			ours++
			ready := false
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady {
					ready = c.Status == corev1.ConditionTrue
				}
			}
			if !ready || p.DeletionTimestamp != nil {
				return false
			}
		}
		if ours == 0 || ours < int(*set.Spec.Replicas) {
			return false
		}
	}
	return true
}

// elsewhere is what the read of namespace tenant must not return: a pod of
// no Express node there, and a node and its pod in another namespace.
func elsewhere() []client.Object {
	other := &v2alpha1.Backend{ObjectMeta: metav1.ObjectMeta{Name: "acme-be", Namespace: "other"}}
	other.Spec.ClusterConfig.ClusterName = "acme"
	otherPod := podOf("acme-be", 0, 0, corev1.ConditionTrue)
	otherPod.Namespace = "other"
	bare := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "tenant"}}
	return []client.Object{other, otherPod, bare}
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

// podOf is pod ordinal of node's StatefulSet on machine-1, Ready as ready
// says: the first made (incarnation 0), or one made again.
func podOf(node string, ordinal, incarnation int, ready corev1.ConditionStatus) *corev1.Pod {
	name := fmt.Sprintf("%s-%d", node, ordinal)
	uid := types.UID("uid-" + name)
	if incarnation > 0 {
		uid = "" // the store gives it one of its own
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "tenant", UID: uid,
			Labels: map[string]string{v2alpha1.LabelNode: node},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: node,
				UID: types.UID("set-" + node), Controller: ptr.To(true)}}},
		Spec:   corev1.PodSpec{NodeName: "machine-1"},
		Status: corev1.PodStatus{Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}},
	}
}

// randomWrites returns a between for a versionedStore that makes, before
// one read in writes, a random write to twoFrontendTenant: a pod turning
// Ready or not, beginning to terminate, gone or made again, a StatefulSet
// scaled between one and two, the Backend or fe1 brought down or up, fe1
// deleted or made again; with machines, machine-1 turning Ready or not
// too. Reads run at once, so rnd is shared under a lock.
func randomWrites(rnd *rand.Rand, machines bool, writes int) func(*versionedStore, client.Object) {
	var mu sync.Mutex
	pods := []struct {
		node    string
		ordinal int
	}{{"acme-be", 0}, {"acme-be", 1}, {"acme-fe1", 0}}
	return func(s *versionedStore, _ client.Object) {
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
		case 1: // a pod begins to terminate, or is gone
			p := pods[rnd.IntN(len(pods))]
			got, ok := s.current(podOf(p.node, p.ordinal, 0, "")).(*corev1.Pod)
			switch {
			case ok && got.DeletionTimestamp == nil && rnd.IntN(2) == 0:
				got.DeletionTimestamp = ptr.To(metav1.NewTime(storeEpoch))
				s.write(got)
			case ok:
				s.remove(got)
			}
		case 2: // a pod is made again, not Ready yet or Ready at once
			p := pods[rnd.IntN(len(pods))]
			if s.current(podOf(p.node, p.ordinal, 0, "")) == nil {
				ready := corev1.ConditionFalse
				if rnd.IntN(2) == 0 {
					ready = corev1.ConditionTrue
				}
				s.write(podOf(p.node, p.ordinal, 1, ready))
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
// start out of order: a pod read Ready crashes, a pod read as not found is
// made, not Ready, a node read down is brought up, fe1 read absent is made. Reads run at once, so rnd is shared
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
			switch asked := asked.(type) {
			case *v2alpha1.Frontend:
				if asked.Name == "acme-fe1" && s.current(asked) == nil {
					asked.Spec.ClusterConfig.ClusterName = "acme"
					s.write(asked)
				}
			case *corev1.Pod:
				// Made again, not Ready yet: a pod read as not found may
				// have been there in between.
				at := strings.LastIndex(asked.Name, "-")
				if ordinal, err := strconv.Atoi(asked.Name[at+1:]); err == nil && s.current(asked) == nil {
					s.write(podOf(asked.Name[:at], ordinal, 1, corev1.ConditionFalse))
				}
			}
		}
	}
}

// A node is Ready with as many Ready pods as its StatefulSet wants,
// counted: the Backend's StatefulSet scaled down to one, its pod 1 Ready
// and pod 0 not found, is Ready. So a pod not found at both of its reads
// may have been there in between, not Ready: here be-0 is made between its
// read and be-1's, be-1 turns Ready, and after be-1 is read again it
// crashes and be-0 is deleted. Both reads agree — be-0 not found, be-1
// Ready — yet the Backend was Ready at no revision: fe2's pod is not let
// start on the read by name, and the tenant is read whole.
func TestAPodOfAPredecessorNotFoundAtBothReadsHasTheTenantReadWhole(t *testing.T) {
	var world, cached []client.Object
	for _, o := range twoFrontendTenant() {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			if o.Name == "acme-be" {
				o.Spec.Replicas, o.Status.Replicas = ptr.To[int32](1), 2 // pod 1 not deleted yet
			}
		case *corev1.Pod:
			if o.Name == "acme-be-1" {
				o.Status.Conditions[0].Status = corev1.ConditionFalse
			}
			if o.Name == "acme-be-0" {
				cached = append(cached, o) // the cache has not seen it go
				continue
			}
		}
		world = append(world, o)
	}
	// The cache knows be-0 alone: it is read first, be-1 in the next round.
	cached = append(cached, without(world, "acme-be-1")...)
	cache := indexed(fake.NewClientBuilder()).WithObjects(cloned(cached)...).Build()
	store := newVersionedStore(world...)
	reads := &podReads{}
	be1ReadAgain := make(chan struct{})
	store.between = func(s *versionedStore, asked client.Object) {
		if asked != nil && reads.begin(asked) == 2 && asked.GetName() == "acme-be-0" {
			awaitClosed(t, be1ReadAgain, "be-1 was not read again") // be-1 is read again first
		}
	}
	store.after = func(s *versionedStore, asked, _ client.Object) {
		if asked == nil {
			return
		}
		switch n := reads.of(asked.GetName()); {
		case asked.GetName() == "acme-be-0" && n == 1:
			s.write(podOf("acme-be", 0, 1, corev1.ConditionFalse))
			setStoredReady(s, "acme-be", 1, corev1.ConditionTrue)
		case asked.GetName() == "acme-be-1" && n == 2:
			setStoredReady(s, "acme-be", 1, corev1.ConditionFalse)
			s.remove(podOf("acme-be", 0, 0, ""))
			close(be1ReadAgain)
		}
	}
	requireReadWhole(t, cache, store, "be-0 not found and be-1 Ready")
}

// The same for a pod above the StatefulSet's replicas, which a StatefulSet
// controller that has not seen a scale down yet makes again: the Backend
// scaled down to one, be-0 not Ready, be-1 gone. be-1 is read not found and
// made again, not Ready; be-0 turns Ready and is read so; fe1-0 is read
// again Ready and crashes; be-1 goes before it is read again. Both reads
// agree — be-0 Ready, be-1 not found, fe1-0 Ready — yet at no revision were
// the Backend and fe1 both Ready.
func TestAPodAboveItsStatefulSetsReplicasNotFoundAtBothReadsHasTheTenantReadWhole(t *testing.T) {
	var world []client.Object
	for _, o := range twoFrontendTenant() {
		switch o := o.(type) {
		case *appsv1.StatefulSet:
			if o.Name == "acme-be" {
				o.Spec.Replicas, o.Status.Replicas = ptr.To[int32](1), 1
			}
		case *corev1.Pod:
			if o.Name == "acme-be-0" {
				o.Status.Conditions[0].Status = corev1.ConditionFalse
			}
		}
		world = append(world, o)
	}
	// The cache still has be-1.
	cache := indexed(fake.NewClientBuilder()).WithObjects(cloned(world)...).Build()
	store := newVersionedStore(without(world, "acme-be-1")...)
	reads := &podReads{}
	be1Made, fe1Crashed := make(chan struct{}), make(chan struct{})
	store.between = func(s *versionedStore, asked client.Object) {
		if asked == nil {
			return
		}
		switch n := reads.begin(asked); {
		case asked.GetName() == "acme-be-0" && n == 1:
			awaitClosed(t, be1Made, "be-1 was not read")
			setStoredReady(s, "acme-be", 0, corev1.ConditionTrue)
		case asked.GetName() == "acme-be-1" && n == 2:
			awaitClosed(t, fe1Crashed, "fe1-0 was not read again")
			s.remove(podOf("acme-be", 1, 0, ""))
		}
	}
	store.after = func(s *versionedStore, asked, _ client.Object) {
		if asked == nil {
			return
		}
		switch n := reads.of(asked.GetName()); {
		case asked.GetName() == "acme-be-1" && n == 1:
			s.write(podOf("acme-be", 1, 1, corev1.ConditionFalse))
			close(be1Made)
		case asked.GetName() == "acme-fe1-0" && n == 2:
			setStoredReady(s, "acme-fe1", 0, corev1.ConditionFalse)
			close(fe1Crashed)
		}
	}
	requireReadWhole(t, cache, store, "be-1 not found")
}

// requireReadWhole reads by name whether fe2's pod may start, from cache
// and from store, whose hooks write as the read goes, and requires the pod
// not let start but answered on the whole tenant (fallback moved): at no
// revision the read spanned were the Backend and fe1 both Ready. what says
// what the reads found.
func requireReadWhole(t *testing.T, cache client.Reader, store *versionedStore, what string) {
	t.Helper()
	start := store.now()
	ok, why, err := sequencer.MayStartByName(context.Background(), cache, store, "tenant", "acme-fe2", "", defaults.Builtin(), time.Now(), rollout.Grouping{})
	require.NoError(t, err)
	assert.False(t, ok, "fe2's pod let start on %s:\n%s", what, store.written())
	assert.Equal(t, rollout.FallbackMoved, why.Label, why.Why)
	for _, rev := range revisions(start, store.now()) {
		require.False(t, predecessorsReady(store, rev, "acme-be", "acme-fe1"), "the Backend and fe1 were Ready at revision %d", rev)
	}
}

// setStoredReady sets the Ready condition of pod ordinal of node in s.
func setStoredReady(s *versionedStore, node string, ordinal int, ready corev1.ConditionStatus) {
	p := s.current(podOf(node, ordinal, 0, "")).(*corev1.Pod)
	p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
	s.write(p)
}

// podReads counts, for a scripted test's hooks, the reads of each pod.
type podReads struct {
	mu sync.Mutex
	n  map[string]int
}

// begin counts a read of asked and returns which read of it this is: 1 for
// the first; 0 where asked is not a pod.
func (r *podReads) begin(asked client.Object) int {
	if _, ok := asked.(*corev1.Pod); !ok {
		return 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[asked.GetName()]++
	return r.n[asked.GetName()]
}

// of returns how many reads of pod name have begun.
func (r *podReads) of(name string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[name]
}

// awaitClosed waits for ch to close, and fails the test saying what did not
// happen where it does not within 10 s. It reports whether ch closed.
func awaitClosed(t *testing.T, ch <-chan struct{}, what string) bool {
	select {
	case <-ch:
		return true
	case <-time.After(10 * time.Second):
		t.Error(what)
		return false
	}
}

// without returns objects but the one called name.
func without(objects []client.Object, name string) []client.Object {
	var out []client.Object
	for _, o := range objects {
		if o.GetName() != name {
			out = append(out, o)
		}
	}
	return out
}

// A pod above both a StatefulSet's replicas and its status's, which the
// cache has not seen, is not reached by any read by name: scaled up to two
// and down to one again before its controller wrote its status, the
// Backend's StatefulSet made be-1, not Ready, and still says one. A
// StatefulSet whose controller has not acted on its spec yet has the
// tenant read whole, where be-1 is seen.
func TestAStatefulSetItsControllerHasNotCaughtUpWithHasTheTenantReadWhole(t *testing.T) {
	var world []client.Object
	for _, o := range twoFrontendTenant() {
		if set, ok := o.(*appsv1.StatefulSet); ok && set.Name == "acme-be" {
			set.Spec.Replicas, set.Status.Replicas = ptr.To[int32](1), 1
			set.Generation, set.Status.ObservedGeneration = 3, 1 // scaled to two, then to one
		}
		world = append(world, o)
	}
	for _, o := range world {
		if p, ok := o.(*corev1.Pod); ok && p.Name == "acme-be-1" {
			p.Status.Conditions[0].Status = corev1.ConditionFalse // made again by the scale up
		}
	}
	// The cache has not seen be-1.
	cache := indexed(fake.NewClientBuilder()).WithObjects(cloned(without(world, "acme-be-1"))...).Build()
	requireReadWhole(t, cache, newVersionedStore(world...), "the StatefulSet's replicas, be-1 not read")
}
