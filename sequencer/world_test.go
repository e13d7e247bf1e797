package sequencer

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/defaults"
)

// world is an in-memory tenant: the webhook's pure admission rules, the
// sequencer's Plan, and a simulated Express operator that honours the gate,
// stepped tick by tick. It records what happened in a log and the order in
// which the operator started rolling nodes.
type world struct {
	t       testing.TB
	orders  defaults.Orders
	cluster string
	nodes   map[string]v2alpha1.Node
	pods    map[string][]Pod
	now     time.Time
	tick    int

	// rng, when set, randomises rollout durations, crash recovery delays
	// and the operator's processing order.
	rng *rand.Rand
	// rollTicks is how many ticks a rollout takes without rng.
	rollTicks int
	// deadline is the progress deadline.
	deadline time.Duration
	// settle is the settle time.
	settle time.Duration
	// stuck nodes never become Ready when rolled.
	stuck map[string]bool

	rolling  map[string]int // ticks left until Ready
	crashed  map[string]int // ticks left until the operator re-provisions
	log      []string
	started  []string
	oracle   func(w *world, name string) (bool, string)
	released int
}

func newWorld(t testing.TB, cluster string) *world {
	return &world{
		t: t, orders: defaults.Builtin(), cluster: cluster,
		nodes: map[string]v2alpha1.Node{}, pods: map[string][]Pod{},
		now:       time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC),
		rollTicks: 2, rolling: map[string]int{}, crashed: map[string]int{}, stuck: map[string]bool{},
		oracle: independentRequirementsHold,
	}
}

func (w *world) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("%03d ", w.tick)+fmt.Sprintf(format, args...))
}

func (w *world) name(key string) string { return w.cluster + "-" + key }

// admit runs the mutating webhook's rules on a created (old nil) or updated node.
func (w *world) admit(n, old v2alpha1.Node) {
	w.orders.Apply(n)
	var oldSpec *v2alpha1.NodeSpec
	if old != nil {
		oldSpec = old.NodeSpec()
	}
	if AdmissionNeedsGate(oldSpec, n.NodeSpec()) {
		n.NodeSpec().AddGate(v2alpha1.GateSequencer)
		ann := n.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[v2alpha1.AnnotationTargetChangedAt] = w.now.Format(time.RFC3339Nano)
		n.SetAnnotations(ann)
	}
	n.SetGeneration(n.GetGeneration() + 1)
	w.nodes[n.GetName()] = n
}

// create admits a new node with key at version.
func (w *world) create(key, version string, edit func(*v2alpha1.NodeSpec)) {
	kind := v2alpha1.KindFrontend
	if key == "be" {
		kind = v2alpha1.KindBackend
	}
	n := v2alpha1.NewNode(kind)
	n.SetName(w.name(key))
	n.SetNamespace("tenant")
	n.NodeSpec().ClusterConfig.ClusterName = w.cluster
	n.NodeSpec().ExpressVersion = version
	if edit != nil {
		edit(n.NodeSpec())
	}
	w.admit(n, nil)
	w.logf("create %s", key)
}

// tenant creates be and fe1…fe(size-1) at version.
func (w *world) tenant(size int, version string) {
	w.create("be", version, nil)
	for i := 1; i < size; i++ {
		w.create(fmt.Sprintf("fe%d", i), version, nil)
	}
}

// update changes a node's spec through the webhook.
func (w *world) update(key string, edit func(v2alpha1.Node)) {
	old := w.nodes[w.name(key)]
	n := old.DeepCopyObject().(v2alpha1.Node)
	edit(n)
	w.admit(n, old)
	w.logf("update %s", key)
}

func (w *world) setVersion(version string, keys ...string) {
	for _, k := range keys {
		w.update(k, func(n v2alpha1.Node) { n.NodeSpec().ExpressVersion = version })
	}
}

func (w *world) annotate(key, annotation, value string) {
	w.update(key, func(n v2alpha1.Node) {
		ann := n.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		if value == "" {
			delete(ann, annotation)
		} else {
			ann[annotation] = value
		}
		n.SetAnnotations(ann)
	})
}

// crash turns every pod of the nodes not Ready, as a crash loop does.
func (w *world) crash(keys ...string) {
	for _, k := range keys {
		name := w.name(k)
		if len(w.pods[name]) == 0 {
			continue // nothing runs that could crash
		}
		for i := range w.pods[name] {
			w.pods[name][i].Conditions[string(corev1.PodReady)] = string(corev1.ConditionFalse)
		}
		delete(w.rolling, name)
		// The operator re-provisions a crashed node a moment after the
		// crash, never before the sequencer has seen it.
		w.crashed[name] = 1
		if w.rng != nil {
			w.crashed[name] = 2 + w.rng.IntN(3)
		}
		w.logf("crash %s", k)
	}
}

func (w *world) snapshot() *Snapshot {
	return &Snapshot{
		Tenant: Tenant{Namespace: "tenant", ClusterName: w.cluster}, Orders: w.orders,
		Nodes: w.nodes, Pods: w.pods, Now: w.now, ProgressDeadline: w.deadline, SettleTime: w.settle,
	}
}

// sequence plans once and applies the decisions as the reconciler does,
// checking each release against the independent oracle.
func (w *world) sequence() {
	for _, d := range Plan(w.snapshot()) {
		n := w.nodes[d.Node]
		wasGated := n.NodeSpec().HasGate(v2alpha1.GateSequencer)
		if wasGated && !d.Gated && isUp(n) && w.oracle != nil {
			if ok, why := w.oracle(w, d.Node); !ok {
				w.t.Fatalf("tick %d: %s released while its requirements do not hold: %s\n%s", w.tick, d.Node, why, strings.Join(w.log, "\n"))
			}
		}
		SetCondition(&n.NodeStatus().Conditions, d.Condition, w.now)
		if d.Gated {
			n.NodeSpec().AddGate(v2alpha1.GateSequencer)
		} else {
			n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
		}
		if wasGated != d.Gated {
			n.SetGeneration(n.GetGeneration() + 1)
			if !d.Gated {
				w.released++
			}
		}
		if d.Event != nil {
			w.logf("%s %s: %s", strings.TrimPrefix(d.Node, w.cluster+"-"), d.Event.Reason, d.Event.Message)
		}
	}
}

// operate runs the simulated Express operator over every node.
func (w *world) operate() {
	names := make([]string, 0, len(w.nodes))
	for name := range w.nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	if w.rng != nil {
		w.rng.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
	}
	for _, name := range names {
		n := w.nodes[name]
		key := strings.TrimPrefix(name, w.cluster+"-")
		spec := n.NodeSpec()
		switch {
		case !spec.IsUp():
			delete(w.crashed, name)
			if len(w.pods[name]) > 0 {
				delete(w.pods, name)
				delete(w.rolling, name)
				w.logf("operator stops %s", key)
			}
		case w.rolling[name] > 0:
			if w.stuck[name] {
				continue // never becomes Ready
			}
			w.rolling[name]--
			if w.rolling[name] == 0 {
				delete(w.rolling, name)
				w.pods[name][0].Conditions[string(corev1.PodReady)] = string(corev1.ConditionTrue)
				w.logf("operator: %s Ready on %s", key, spec.ExpressVersion)
			}
		case w.crashed[name] > 1:
			w.crashed[name]--
		case v2alpha1.IsGated(n):
		case !w.converged(name):
			delete(w.crashed, name)
			w.pods[name] = []Pod{{
				Name: name + "-0", Version: spec.ExpressVersion, Revision: spec.DeploymentRevision,
				Conditions: map[string]string{string(corev1.PodReady): string(corev1.ConditionFalse)},
			}}
			w.rolling[name] = w.rollTicks
			if w.rng != nil {
				w.rolling[name] = 1 + w.rng.IntN(4)
			}
			w.started = append(w.started, key)
			w.logf("operator rolls %s to %s", key, spec.ExpressVersion)
		}
	}
}

func (w *world) converged(name string) bool {
	s := w.snapshot()
	return s.isReady(name) && s.onTarget(name)
}

// settled: nothing pending anywhere and no rollout in flight.
func (w *world) settled() bool {
	s := w.snapshot()
	for name := range w.nodes {
		if s.hasPendingWork(name) || w.rolling[name] > 0 || w.crashed[name] > 0 {
			return false
		}
	}
	return true
}

// run steps sequencer and operator until the tenant settles; it fails the
// test if that takes more than maxTicks.
func (w *world) run(maxTicks int) {
	w.t.Helper()
	for i := 0; i < maxTicks; i++ {
		w.tick++
		w.now = w.now.Add(time.Second)
		if w.rng != nil && w.rng.IntN(2) == 0 {
			w.operate()
			w.sequence()
		} else {
			w.sequence()
			w.operate()
		}
		if w.settled() {
			w.sequence() // record the final conditions
			return
		}
	}
	w.t.Fatalf("the tenant did not settle in %d ticks:\n%s", maxTicks, strings.Join(w.log, "\n"))
}

// startedSince returns the rollouts started since mark.
func (w *world) startedSince(mark int) string { return strings.Join(w.started[mark:], " ") }

func (w *world) condition(key string) *metav1.Condition { return condition(w.nodes[w.name(key)]) }
