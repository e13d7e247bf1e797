package rollout

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// podMayStart is the world's pod webhook: with podsByName, as
// express-sequencer's with --pod-reads-by-name — on the nodes and workload a new
// pod's start rests on, read by name, and on the whole tenant only where
// they cannot be read by name. It fails the test where the answer by name
// lets a pod start that the whole tenant holds; a pod it holds that the
// whole tenant would let start is the sequencer's to let go, and the
// world's convergence checks that it does.
func (w *world) podMayStart(name string) bool {
	whole := w.snapshot()
	ok, _ := PodsMayStart(whole, name)
	if !w.podsByName {
		return ok
	}
	if w.podReads == nil {
		w.podReads = map[string]int{}
	}
	read := w.readByName(whole, name)
	if read == nil {
		w.podReads[ReadTenant]++
		return ok
	}
	if !PodsMayStartByName(read, name) {
		w.podReads[podsHeldByName]++
		if ok {
			w.podReads[podsHeldByNameOnly]++
		}
		return false
	}
	if !ok {
		w.t.Fatalf("tick %d: a new pod of %s was let start on the nodes read by name (%s) while the whole tenant holds it\n%s\n%s",
			w.tick, name, strings.Join(slices.Sorted(maps.Keys(read.Nodes)), ", "), strings.Join(w.log, "\n"), w.dump())
	}
	w.podReads[ReadDecision]++
	return true
}

// The world's counts of pods held on the read by name: all, and those
// the whole tenant would have let start.
const (
	podsHeldByName     = "held"
	podsHeldByNameOnly = "held by name only"
)

// readByName reads, as the pod webhook does, the nodes PodScope names
// until it names no node not read yet, then the workload of those it
// requires; nil where PodScope names too many.
func (w *world) readByName(whole *Snapshot, name string) *Snapshot {
	read := map[string]bool{}
	restricted := whole.withNodes(nil)
	for {
		scope, ok := PodScope(restricted, name)
		if !ok {
			return nil
		}
		more := false
		for _, r := range scope {
			if !read[r] {
				read[r], more = true, true
			}
		}
		if !more {
			out := whole.withNodes(read)
			workload := PodWorkloadScope(scope, name)
			out = out.WithWorkloadOf(whole, workload)
			out.SetsConverged = setsConverged(out, w.statefulSets()) // as a read of these nodes alone finds it
			return out
		}
		restricted = whole.withNodes(read)
	}
}

// withNodes is a copy of s with only the nodes named in names, and no
// workload.
func (s *Snapshot) withNodes(names map[string]bool) *Snapshot {
	out := &Snapshot{Tenant: s.Tenant, Orders: s.Orders, Now: s.Now, ProgressDeadline: s.ProgressDeadline, Grouping: s.Grouping, Nodes: map[string]v2alpha1.Node{}}
	for name := range names {
		if n, ok := s.Nodes[name]; ok {
			out.Nodes[name] = n
		}
	}
	return out
}

// PodScope names every node a new pod's start can rest on: read by name,
// they hold its requirements whatever the nodes it does not name say.
func TestWhatANewPodsStartRestsOn(t *testing.T) {
	for _, c := range []struct {
		name   string
		orders defaults.Orders
		build  func(w *world)
		node   string
		want   []string
		few    bool
	}{
		{
			name:  "a Backend's start rests on itself alone in the built-in order",
			build: func(w *world) { w.tenant(3, v1) },
			node:  "be", want: []string{"be"}, few: true,
		},
		{
			name:  "a defaulted Frontend's rests on every key before it in the provisioning order, whether or not it exists",
			build: func(w *world) { w.create("fe3", v1, nil) },
			node:  "fe3", want: []string{"be", "fe1", "fe2", "fe3"}, few: true,
		},
		{
			name:   "in a configured order, on the head and the frontends below it not in the head",
			orders: defaults.Orders{Provisioning: defaults.Order{defaults.FrontendKey(5), defaults.Backend}, Upgrade: defaults.Builtin().Upgrade},
			build:  func(w *world) { w.create("fe3", v1, nil) },
			node:   "fe3", want: []string{"be", "fe1", "fe2", "fe3", "fe5"}, few: true,
		},
		{
			name: "an explicit list on what it names and, through a node that is down, on what that one names",
			build: func(w *world) {
				w.create("be", v1, nil)
				w.create("fe1", v1, explicitLists(w, []string{"fe7"}, nil))
				w.create("fe2", v1, explicitLists(w, []string{"fe1"}, nil))
				w.create("fe9", v1, nil)
				w.update("fe1", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) })
			},
			node: "fe2", want: []string{"be", "fe1", "fe2", "fe7"}, few: true,
		},
		{
			name:  "a Frontend with more keys before it than are read by name has its tenant read whole",
			build: func(w *world) { w.create("fe40", v1, nil) },
			node:  "fe40", few: false,
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, "acme")
			if c.orders.Provisioning != nil {
				w.orders = c.orders
			}
			c.build(w)
			read := w.readByName(w.snapshot(), w.name(c.node))
			if !c.few {
				assert.Nil(t, read)
				return
			}
			require.NotNil(t, read)
			var got []string
			for _, r := range must(PodScope(read, w.name(c.node))) {
				got = append(got, w.key(r))
			}
			assert.Equal(t, c.want, got)
		})
	}
}

func must[T any](v T, ok bool) T {
	if !ok {
		panic("not ok")
	}
	return v
}
