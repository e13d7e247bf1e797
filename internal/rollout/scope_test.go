package rollout

import (
	"maps"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// releasing steps w until a plan releases node key, and returns that
// snapshot and its plan.
func releasing(t *testing.T, w *world, key string) (*Snapshot, []Decision) {
	t.Helper()
	for range 50 {
		w.operate()
		s := w.snapshot()
		decisions := Plan(s)
		for _, d := range decisions {
			if d.Node == w.name(key) && Releasing(s, d) {
				return s, decisions
			}
		}
		w.sequence()
	}
	t.Fatalf("no plan released %s:\n%s", key, w.dump())
	return nil, nil
}

func TestWhatAPlanRestsOn(t *testing.T) {
	for name, c := range map[string]struct {
		change  func(w *world)
		release string
		want    []string
	}{
		"an upgrade of fe2 rests on fe2 and the nodes before it in both orders": {
			change: func(w *world) { w.setVersion(v2, "be", "fe1", "fe2", "fe3", "fe4") }, release: "fe2",
			want: []string{"t-be", "t-fe1", "t-fe2"},
		},
		"an upgrade of fe3 rests on every node before it": {
			change: func(w *world) { w.setVersion(v2, "be", "fe1", "fe2", "fe3", "fe4") }, release: "fe3",
			want: []string{"t-be", "t-fe1", "t-fe2", "t-fe3"},
		},
		"a change to the backend alone rests on the backend and the frontends before it in the upgrade order": {
			change: func(w *world) { w.setVersion(v2, "be") }, release: "be",
			want: []string{"t-be", "t-fe1", "t-fe2"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t, "t")
			w.tenant(5, v1)
			w.run(200)
			c.change(w)
			s, decisions := releasing(t, w, c.release)
			assert.Equal(t, c.want, ScopeOf(s, decisions))
		})
	}
	t.Run("a plan that releases and records nothing rests on nothing", func(t *testing.T) {
		w := newWorld(t, "t")
		w.tenant(4, v1)
		w.run(200)
		s := w.snapshot()
		assert.Empty(t, ScopeOf(s, Plan(s)))
	})
}

func TestPlanningOnTheScopedRead(t *testing.T) {
	settled := func(t *testing.T) *world {
		w := newWorld(t, "t")
		w.tenant(5, v1)
		w.run(200)
		w.setVersion(v2, "be", "fe1", "fe2", "fe3", "fe4")
		return w
	}
	fresh := func(s *Snapshot) func() (*Snapshot, error) { return func() (*Snapshot, error) { return s, nil } }

	t.Run("a release the scoped read confirms is planned on it", func(t *testing.T) {
		w := settled(t)
		s, _ := releasing(t, w, "fe2")
		cached := w.cacheSnapshot()
		var asked []string
		_, decisions, read, why, err := PlanOnScoped(cached, func(scope []string) (*Snapshot, Fallback, error) {
			asked = scope
			return cached.WithWorkloadOf(s, scope), Fallback{}, nil
		}, fresh(s))
		require.NoError(t, err)
		assert.Equal(t, ReadDecision, read, why)
		assert.Equal(t, []string{"t-be", "t-fe1", "t-fe2"}, asked)
		assert.False(t, decisionOf(t, decisions, "t-fe2").Gated, "fe2 is released")
	})

	t.Run("a release the scoped read shows a prerequisite short of a pod for is held", func(t *testing.T) {
		w := settled(t)
		s, _ := releasing(t, w, "fe2")
		cached := w.cacheSnapshot()
		// The StatefulSet of fe1 wants a pod the cache has not seen.
		read := *s
		read.MissingPods = map[string]int{"t-fe1": 1}
		_, decisions, how, why, err := PlanOnScoped(cached, func(scope []string) (*Snapshot, Fallback, error) {
			return cached.WithWorkloadOf(&read, scope), Fallback{}, nil
		}, fresh(s))
		require.NoError(t, err)
		assert.Equal(t, ReadDecision, how, why)
		d := decisionOf(t, decisions, "t-fe2")
		assert.True(t, d.Gated, "fe2 waits for fe1's missing pod")
		assert.Contains(t, d.Condition.Message, "t-fe1")
	})

	t.Run("a tenant whose StatefulSets are named otherwise is read whole", func(t *testing.T) {
		w := settled(t)
		s, _ := releasing(t, w, "fe2")
		naming := Fallback{FallbackNaming, "t-fe1 has no StatefulSet named after it"}
		_, _, read, why, err := PlanOnScoped(w.cacheSnapshot(), func([]string) (*Snapshot, Fallback, error) {
			return nil, naming, nil
		}, fresh(s))
		require.NoError(t, err)
		assert.Equal(t, ReadTenant, read)
		assert.Equal(t, naming, why)
	})

	// GatherScoped lays fresh workload over cached nodes; a scoped plan can
	// rest on more than the cached one did when that workload frees a node
	// (a StatefulSet's record of convergence). PlanOnScoped is shown it
	// here with a node told to ignore its prerequisites.
	t.Run("a plan that on the scoped read releases a node it did not rest on reads the tenant", func(t *testing.T) {
		w := settled(t)
		s, _ := releasing(t, w, "fe2")
		cached := w.cacheSnapshot()
		_, decisions, read, why, err := PlanOnScoped(cached, func(scope []string) (*Snapshot, Fallback, error) {
			// What the scoped read finds: fe4 told to ignore its
			// prerequisites since the cache saw it, and so released too.
			scoped := cached.WithWorkloadOf(s, scope)
			scoped.Nodes = maps.Clone(scoped.Nodes)
			fe4 := scoped.Nodes["t-fe4"].DeepCopyObject().(v2alpha1.Node)
			setAnnotation(fe4, v2alpha1.AnnotationIgnorePrerequisites, "true")
			scoped.Nodes["t-fe4"] = fe4
			return scoped, Fallback{}, nil
		}, fresh(s))
		require.NoError(t, err)
		assert.Equal(t, ReadTenant, read)
		assert.Equal(t, FallbackWider, why.Label)
		assert.Equal(t, Plan(s), decisions, "planned on the tenant read whole")
	})

	t.Run("a plan that releases nothing reads nothing", func(t *testing.T) {
		w := newWorld(t, "t")
		w.tenant(3, v1)
		w.run(200)
		_, _, read, _, err := PlanOnScoped(w.cacheSnapshot(), func([]string) (*Snapshot, Fallback, error) {
			t.Fatal("read for a plan that releases nothing")
			return nil, Fallback{}, nil
		}, func() (*Snapshot, error) {
			t.Fatal("read for a plan that releases nothing")
			return nil, nil
		})
		require.NoError(t, err)
		assert.Equal(t, ReadCache, read)
	})
}

// A snapshot overlaid with its own workload is the snapshot: nothing a
// decision reads is lost in the overlay.
func TestASnapshotOverlaidWithItsOwnWorkloadPlansAsItself(t *testing.T) {
	w := newWorld(t, "t")
	w.tenant(5, v1)
	w.run(200)
	w.setVersion(v2, "be", "fe1", "fe2", "fe3", "fe4")
	w.crash("fe3")
	for range 40 {
		w.operate()
		s := w.snapshot()
		all := make([]string, 0, len(s.Nodes))
		for name := range s.Nodes {
			all = append(all, name)
		}
		assert.Equal(t, Plan(s), Plan(w.cacheSnapshot().WithWorkloadOf(s, all)), "tick %d", w.tick)
		w.sequence()
	}
}

// A node whose pods' StatefulSet is not named after it says so in its
// condition: a release that rests on it reads the tenant whole.
func TestARolloutCompleteSaysWhenTheNodesStatefulSetIsNamedOtherwise(t *testing.T) {
	w := newWorld(t, "t")
	w.tenant(3, v1)
	w.run(200)
	s := *w.snapshot()
	s.Pods = maps.Clone(s.Pods)
	var pods []Pod
	for _, p := range s.Pods["t-fe1"] {
		p.Owners = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "t-fe1-set", UID: "set-uid", Controller: ptr.To(true)}}
		pods = append(pods, p)
	}
	s.Pods["t-fe1"] = pods
	decisions := Plan(&s)
	fe1 := decisionOf(t, decisions, "t-fe1")
	assert.Equal(t, v2alpha1.ReasonRolloutComplete, fe1.Condition.Reason)
	assert.Contains(t, fe1.Condition.Message, "its pods' StatefulSet t-fe1-set is not named after it, as the operator contract asks: it cannot be read by name")
	assert.NotContains(t, decisionOf(t, decisions, "t-fe2").Condition.Message, "not named after it", "fe2's StatefulSet is its own")
}

// A record of a gated node's own convergence (RecordConverged) rests on
// its workload alone: not on its prerequisites, nor on the Backend.
func TestARecordOfAGatedNodesOwnConvergenceRestsOnItAlone(t *testing.T) {
	s, decisions, fe2 := recordingConverged(t)
	var only []Decision
	for _, d := range decisions {
		if restsOnFreshState(s, d) {
			only = append(only, d)
		}
	}
	require.Len(t, only, 1, "the plan rests on fresh state for fe2's record alone")
	assert.Equal(t, []string{fe2}, ScopeOf(s, decisions))
}
