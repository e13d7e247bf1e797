package rollout

import (
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// world is an in-memory tenant: the webhooks' pure admission rules (nodes
// and pods), the sequencer's Plan, and a simulated Express operator that
// honours the gate and a scheduler that honours scheduling gates, stepped
// tick by tick. It records what happened in a log and the order in which
// nodes started rolling (their new pods became schedulable).
type world struct {
	t       testing.TB
	orders  defaults.Orders
	cluster string
	nodes   map[string]v2alpha1.Node
	pods    map[string][]Pod
	now     time.Time
	tick    int

	// rng, when set, randomises rollout durations, the operator's reaction
	// to a crash (possibly none at all) and its processing order.
	rng *rand.Rand
	// rollTicks is how many ticks a rollout takes without rng.
	rollTicks int
	// deadline is the progress deadline; grouping the change grouping.
	deadline time.Duration
	grouping Grouping
	// blips: with rng, each tick may blip the readiness of one node whose
	// pods are Ready (a probe failing once).
	blips bool
	// stuck nodes never become Ready when rolled.
	stuck map[string]bool
	// missing are, by node name, pods the node's StatefulSet wants that do
	// not exist (the fresh reads' MissingPods).
	missing map[string]int

	rolling map[string]int // ticks left until Ready, once schedulable
	crashed map[string]int // ticks left until the operator re-provisions
	// brokenTarget: the node's crash is its target's (a bad build): it
	// lasts until the node is released for another target (crashOnTarget).
	brokenTarget map[string]string
	blipped      map[string]int    // ticks left until pods not Ready for a moment are Ready again
	scaling      map[string]int    // pods a StatefulSet scaled up creates at its next look
	lastHash     map[string]string // the target of the pods the operator last created
	// setCurrent is each node's StatefulSet's status.currentRevision (the
	// target of its template then): set when the StatefulSet is created
	// (a brand-new one's revisions are equal from the start) and when a
	// rollout completes, every pod Ready on its template at once.
	setCurrent map[string]string
	// convergedSince is the world's truth the oracle reads: the target on
	// which every pod of the node was Ready at once since its latest
	// release — where anything could record it: not for a release that
	// found no StatefulSet of the node (a first rollout; releasedBare),
	// whose convergence nothing in the API server keeps (the race
	// docs/sequencer.md accepts).
	convergedSince map[string]string
	// seenConverged is the target on which a pass of the live sequencer
	// found every pod of the node Ready at once since its latest release,
	// and whose writes for the node were not lost: what it could record,
	// however it does (the oracle reads this, not the sequencer's records).
	// seenThisPass is what the pass being applied found.
	seenConverged, seenThisPass map[string]string
	// specOfHash is what the pods of each target hash admitted run: a
	// function of the hash, shared by the explorer's copies of the world.
	specOfHash   map[string]podSpec
	releasedBare map[string]bool
	podSeq       int
	uidSeq       int
	log          []string
	started      []string
	// writes counts the writes of the user (create, update); targetWrite
	// and idWrite are, per node, the write that last changed its target (or
	// its order: taken down, created down, paused or unpaused, a list of the
	// user's) and its rollout-id: the world's own record of which changes
	// came with a new id, not the webhook's stamps.
	writes               int
	targetWrite, idWrite map[string]write
	// nodeLeftAt is when a node last left the tenant (deleted): a change
	// of the tenant's, held for the settle time.
	nodeLeftAt time.Time
	// startedAt is the tick each rollout of started began at, and
	// startedTarget the target its pods carry.
	startedAt     []int
	startedTarget []string
	// phases are where each phase of a scenario's change began in started.
	phases []int
	oracle func(w *world, name string, releasing map[string]bool) (bool, string)
	// circular: the upgrade waits the plan being applied dropped as
	// circular (Decision.CircularWaits), node → prerequisites: the
	// oracle checks each drop it relies on lies on a loop of its own.
	circular map[string][]string
	released int
	// podsReleased counts pods that became schedulable, each checked.
	podsReleased int
	// freezes: with rng, a second replica now and then plans, freezes, and
	// wakes some ticks later to send its writes (frozen_sequencer_test.go);
	// frozen is its plan meanwhile; wakes counts them, refused the releases
	// the release guard refused.
	freezes bool
	// cyclesMaySettle: the user's lists may close a loop no order meets (a
	// loop of upgrade waits alone, through a defaulted list, which the
	// validating webhook only warns of); the tenant settles with the nodes
	// of a genuine loop held as DependencyCycle and those behind them
	// waiting (settledBehindCycles).
	cyclesMaySettle bool
	// settledOnLoops counts the times the tenant settled so.
	settledOnLoops int
	// setGen is each node's StatefulSet's metadata.generation, moved on by
	// every change of its spec (setSpec: its template, replicas, and
	// scaleUps, the times it was scaled up); genAtRelease is the one the
	// node's latest release recorded (released-set-revision).
	setGen, genAtRelease map[string]int64
	setSpec              map[string]string
	scaleUps             map[string]int
	// lastRun is, by node name, the target its pods last started on (start).
	lastRun        map[string]string
	frozen         *frozenPlan
	wakes, refused int
	// scoped: the sequencer plans as with --scoped-reads (PlanOnScoped):
	// on a snapshot of the cache — no StatefulSets — with the workload of
	// the nodes a release rests on read fresh; reads counts its plans by
	// the read they were made on.
	scoped bool
	reads  map[string]int
	// podsByName: the pod webhook answers first on the nodes and workload
	// a new pod's start rests on, read by name (PodScope,
	// PodsMayStartByName), and on the whole tenant where that answer is
	// no; podReads counts its answers by the read they were made on.
	podsByName bool
	podReads   map[string]int
	// gone are, by node name, the StatefulSet and pods of a node deleted
	// and created again (recreate) that the garbage collector has not
	// removed yet: the new node's StatefulSet cannot be created under the
	// same name until it has.
	gone map[string]*goneWorkload
	// renders are, by rollout-id, the nodes a render with that id renders
	// (the world's own record; the nodes carry it in
	// AnnotationRenderedNodes): only renders that say so.
	renders map[string][]string
	// renderOrder are the renders' rollout-ids, the one the user applied
	// last at the end (an id applied again, values reverted, moves to the
	// end).
	renderOrder []string
	// scaledDown are the nodes whose StatefulSet the operator scaled to 0
	// (taken down) and has not scaled up again: it does so only when it
	// provisions the node again, once not gated.
	scaledDown map[string]bool
}

// goneWorkload is what is left of a deleted node until the garbage
// collector removes it.
type goneWorkload struct {
	node v2alpha1.Node
	pods []Pod
	hash string
	// looks left until the garbage collector removes it.
	looks int
}

// changedWithoutNewID: node name carries no rollout-id, or its latest
// target change and its latest id change were different writes — by the
// world's own record, not the webhook's stamps. Two writes in one instant
// of the world's clock (a tenant created, then given its id) are one change
// to any record; the API server's clock tells them apart.
func (w *world) changedWithoutNewID(name string) bool {
	target, id := w.targetWrite[name], w.idWrite[name]
	return w.nodes[name].GetAnnotations()[v2alpha1.AnnotationRolloutID] == "" || target.seq != id.seq && !target.at.Equal(id.at)
}

// podSpec is what a pod made for a target runs: its version and revision.
type podSpec struct{ version, revision string }

// write is one write of the user's: its number and its instant.
type write struct {
	seq int
	at  time.Time
}

func newWorld(t testing.TB, cluster string) *world {
	return &world{
		t: t, orders: defaults.Builtin(), cluster: cluster,
		nodes: map[string]v2alpha1.Node{}, pods: map[string][]Pod{},
		now:       time.Date(2026, 11, 21, 3, 0, 0, 0, time.UTC),
		rollTicks: 2, rolling: map[string]int{}, crashed: map[string]int{}, blipped: map[string]int{}, stuck: map[string]bool{},
		scaling:  map[string]int{},
		lastHash: map[string]string{}, setCurrent: map[string]string{}, convergedSince: map[string]string{}, seenConverged: map[string]string{}, releasedBare: map[string]bool{}, oracle: independentRequirementsHold,
		targetWrite: map[string]write{}, idWrite: map[string]write{}, specOfHash: map[string]podSpec{}, brokenTarget: map[string]string{}, gone: map[string]*goneWorkload{}, renders: map[string][]string{}, scaledDown: map[string]bool{},
	}
}

func (w *world) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("%03d ", w.tick)+fmt.Sprintf(format, args...))
}

func (w *world) name(key string) string { return w.cluster + "-" + key }

func (w *world) key(name string) string { return strings.TrimPrefix(name, w.cluster+"-") }

// admit runs the mutating webhook's rules on a created (old nil) or updated
// node, as a user (not the sequencer) writes it; the generation moves when
// the spec changes, as the API server does it.
func (w *world) admit(n, old v2alpha1.Node) {
	w.writes++
	if id := n.GetAnnotations()[v2alpha1.AnnotationRolloutID]; old == nil && id != "" || old != nil && old.GetAnnotations()[v2alpha1.AnnotationRolloutID] != id {
		w.idWrite[n.GetName()] = write{w.writes, w.now}
	}
	defaults.RestoreRecord(n, old)
	w.orders.Apply(n)
	// A change: a new target of a node up, or brought up (a rollout), or
	// one of the node's order — created or taken down, a pause set or
	// lifted, a prerequisite list of the user's — which frees or holds the
	// nodes after it as a rollout does. A new target of a node that stays
	// down is none: the nodes after it walk through it to its lists.
	up := n.NodeSpec().IsUp()
	rollout := up && (old == nil || !old.NodeSpec().IsUp() || TargetHashOf(old.NodeSpec()) != TargetHashOf(n.NodeSpec()))
	order := old == nil && !up || old != nil && (old.NodeSpec().IsUp() != up || annotated(old, v2alpha1.AnnotationPauseRollout) != annotated(n, v2alpha1.AnnotationPauseRollout) ||
		userLists(old) != userLists(n))
	if rollout || order {
		w.targetWrite[n.GetName()] = write{w.writes, w.now}
	}
	a := Admission{Old: old, Hash: TargetHashOf(n.NodeSpec()), Now: w.now, SettleTime: w.grouping.SettleTime}
	w.specOfHash[a.Hash] = podSpec{n.NodeSpec().ExpressVersion, n.NodeSpec().DeploymentRevision}
	if old != nil {
		a.OldHash = StampedTarget(old)
	}
	Admit(n, a)
	switch {
	case old == nil:
		n.SetGeneration(1)
	case !equality.Semantic.DeepEqual(old.NodeSpec(), n.NodeSpec()):
		n.SetGeneration(old.GetGeneration() + 1)
	}
	w.nodes[n.GetName()] = n
}

// userLists says which prerequisite lists of n are the user's, and what
// they hold: a defaulted list is the operator's order, whatever it holds.
func userLists(n v2alpha1.Node) string {
	var out []string
	for _, l := range defaults.Lists {
		if defaults.IsDefaulted(n, l) {
			out = append(out, "defaulted")
		} else {
			out = append(out, fmt.Sprint(l.Get(n.NodeSpec())))
		}
	}
	return strings.Join(out, " ")
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
	w.uidSeq++
	n.SetUID(types.UID(fmt.Sprintf("uid-%d", w.uidSeq))) // a node created again is another object
	n.SetCreationTimestamp(metav1.Time{Time: w.now})
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

// update changes a node's object through the webhook.
func (w *world) update(key string, edit func(v2alpha1.Node)) {
	old := w.nodes[w.name(key)]
	if old == nil {
		return // deleted: the API server answers NotFound
	}
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

// setConfig changes only configChangeset: a target change all the same.
func (w *world) setConfig(changeset string, keys ...string) {
	for _, k := range keys {
		w.update(k, func(n v2alpha1.Node) { n.NodeSpec().ConfigChangeset = changeset })
	}
}

// renderOf stamps node n as the render of rollout-id id that renders the
// nodes keys does: the id, and the nodes it renders.
func (w *world) renderOf(n v2alpha1.Node, id string, keys []string) {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = w.name(k)
	}
	setAnnotation(n, v2alpha1.AnnotationRolloutID, id)
	setAnnotation(n, v2alpha1.AnnotationRenderedNodes, strings.Join(names, ","))
	w.renders[id] = names
	w.renderOrder = append(slices.DeleteFunc(w.renderOrder, func(r string) bool { return r == id }), id)
}

// lastRender returns the rollout-id of the render the user applied last,
// "" before any render.
func (w *world) lastRender() string {
	if len(w.renderOrder) == 0 {
		return ""
	}
	return w.renderOrder[len(w.renderOrder)-1]
}

// setRolloutID annotates the nodes with a rollout-id, as a chart render does.
func (w *world) setRolloutID(id string, keys ...string) {
	for _, k := range keys {
		w.update(k, func(n v2alpha1.Node) { setAnnotation(n, v2alpha1.AnnotationRolloutID, id) })
	}
}

func (w *world) annotate(key, annotation, value string) {
	w.update(key, func(n v2alpha1.Node) { setAnnotation(n, annotation, value) })
}

func setAnnotation(n v2alpha1.Node, key, value string) {
	ann := n.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	if value == "" {
		delete(ann, key)
	} else {
		ann[key] = value
	}
	n.SetAnnotations(ann)
}

// remove deletes a node: it is being deleted until the operator has
// stopped its pods (its finalizer). The deletion is a change of the order
// of every node that stays — the nodes after it stop waiting for it — and
// the validating webhook dates it so on each of them, writing as the
// sequencer (DeletionDater), before the node is marked deleted.
func (w *world) remove(key string) {
	n := w.nodes[w.name(key)]
	if n == nil || n.GetDeletionTimestamp() != nil {
		return // gone, or being deleted: a second delete changes nothing
	}
	w.dateDeletion(n.GetName())
	n.SetDeletionTimestamp(&metav1.Time{Time: w.now})
	w.logf("delete %s", key)
}

// dateDeletion is the validating webhook's part of node name's deletion:
// every other node that stays (not being deleted) is written, as the
// sequencer, with the date (DeletionDater); the world records when a node
// last left the tenant, of nodes that stay.
func (w *world) dateDeletion(deleted string) {
	for name, s := range w.nodes {
		if name == deleted || s.GetDeletionTimestamp() != nil {
			continue
		}
		w.nodeLeftAt = w.now // the order of the nodes that stay changed; with none, nothing's did
		m := s.DeepCopyObject().(v2alpha1.Node)
		setAnnotation(m, v2alpha1.AnnotationNodeLeftTenantAt, w.now.Format(time.RFC3339Nano))
		Admit(m, Admission{Old: s, Hash: TargetHashOf(m.NodeSpec()), OldHash: StampedTarget(s), FromSequencer: true, Now: w.now, SettleTime: w.grouping.SettleTime})
		w.nodes[name] = m
	}
}

// recreate deletes each node and at once creates it again with the spec
// and annotations its user wrote (kubectl replace --force, Argo CD
// Replace=true,Force=true, helm uninstall && helm install): another object
// (a new UID), gated as a new node, while its old StatefulSet and pods —
// same node label, same target hash — are left to the garbage collector
// for a few looks (3; with rng, 1–4), during which the new node's
// StatefulSet cannot be created under the same name.
func (w *world) recreate(keys ...string) {
	for _, k := range keys {
		name := w.name(k)
		old := w.nodes[name]
		if old == nil || old.GetDeletionTimestamp() != nil {
			continue
		}
		w.dateDeletion(name)
		if w.lastHash[name] != "" && w.gone[name] == nil {
			looks := 3
			if w.rng != nil {
				looks = 1 + w.rng.IntN(4)
			}
			w.gone[name] = &goneWorkload{node: old, pods: w.pods[name], hash: w.lastHash[name], looks: looks}
		}
		for _, m := range []map[string]string{w.lastHash, w.setCurrent, w.brokenTarget, w.convergedSince, w.seenConverged, w.setSpec} {
			delete(m, name)
		}
		delete(w.setGen, name) // another StatefulSet
		delete(w.lastRun, name)
		delete(w.genAtRelease, name)
		for _, m := range []map[string]int{w.rolling, w.crashed, w.blipped, w.scaling} {
			delete(m, name)
		}
		delete(w.scaledDown, name)
		delete(w.pods, name)
		delete(w.releasedBare, name)
		n := v2alpha1.NewNode(old.NodeKind())
		n.SetName(name)
		n.SetNamespace(old.GetNamespace())
		w.uidSeq++
		n.SetUID(types.UID(fmt.Sprintf("uid-%d", w.uidSeq)))
		n.SetCreationTimestamp(metav1.Time{Time: w.now})
		*n.NodeSpec() = *old.NodeSpec().DeepCopy()
		n.NodeSpec().RolloutGates = nil
		if deps := n.NodeSpec().DeploymentDependencies; deps != nil {
			defaulted := old.GetAnnotations()[v2alpha1.AnnotationDefaultedPrerequisites]
			if strings.Contains(defaulted, "provisioningPrerequisites") {
				deps.ProvisioningPrerequisites = nil
			}
			if strings.Contains(defaulted, "upgradePrerequisites") {
				deps.UpgradePrerequisites = nil
			}
			if deps.ProvisioningPrerequisites == nil && deps.UpgradePrerequisites == nil {
				n.NodeSpec().DeploymentDependencies = nil
			}
		}
		for _, a := range []string{v2alpha1.AnnotationRolloutID, v2alpha1.AnnotationRenderedNodes, v2alpha1.AnnotationPauseRollout, v2alpha1.AnnotationIgnorePrerequisites} {
			if v := old.GetAnnotations()[a]; v != "" {
				setAnnotation(n, a, v)
			}
		}
		if last := w.lastRender(); slices.Contains(w.renders[last], name) {
			// Created again from the current render's manifests.
			setAnnotation(n, v2alpha1.AnnotationRolloutID, last)
			setAnnotation(n, v2alpha1.AnnotationRenderedNodes, strings.Join(w.renders[last], ","))
		}
		if old.NodeSpec().HasGate(otherSystemsGate) {
			n.NodeSpec().AddGate(otherSystemsGate)
		}
		w.admit(n, nil)
		w.logf("delete %s and create it again (its old StatefulSet and pods left to the garbage collector)", k)
	}
}

// collectGarbage removes, at the garbage collector's look, what is left of
// nodes deleted and created again once their looks have run out.
// Until then the kubelet runs the old pods on: one that was starting
// becomes Ready.
func (w *world) collectGarbage() {
	for _, name := range slices.Sorted(maps.Keys(w.gone)) {
		g := w.gone[name]
		if g.looks--; g.looks <= 0 {
			delete(w.gone, name)
			w.logf("garbage collector removes the old StatefulSet and pods of %s", w.key(name))
			continue
		}
		for i, p := range g.pods {
			if len(p.Gates) == 0 && !p.Failing && p.Conditions[string(corev1.PodReady)] != string(corev1.ConditionTrue) {
				g.pods[i].Conditions = map[string]string{string(corev1.PodReady): string(corev1.ConditionTrue)}
				w.logf("old pod %s of %s Ready", p.Name, w.key(name))
			}
		}
	}
}

// crash turns every pod of the nodes not Ready and failing, as a crash loop
// does (CrashLoopBackOff); the operator re-provisions them once the node is
// not gated (without rng: at its next look; with rng, after 1–3 looks).
func (w *world) crash(keys ...string) {
	for _, k := range keys {
		name := w.name(k)
		if len(w.pods[name]) == 0 {
			continue // nothing runs that could crash
		}
		for i := range w.pods[name] {
			w.pods[name][i].Conditions[string(corev1.PodReady)] = string(corev1.ConditionFalse)
			w.pods[name][i].Failing = true
		}
		delete(w.rolling, name)
		delete(w.blipped, name)
		w.crashed[name] = 1
		if w.rng != nil {
			w.crashed[name] = 1 + w.rng.IntN(3)
		}
		w.logf("crash %s", k)
	}
}

// otherSystemsGate is a rollout gate of another system: while a node
// carries it, the world's operator does not act on the node (DESIGN §2),
// as a slow or restarting operator does not.
const otherSystemsGate = "example.com/change-freeze"

// toggleOtherSystemsGate adds another system's rollout gate to the nodes
// that lack it and removes it from those that carry it.
func (w *world) toggleOtherSystemsGate(keys ...string) {
	for _, k := range keys {
		w.update(k, func(n v2alpha1.Node) {
			if n.NodeSpec().HasGate(otherSystemsGate) {
				n.NodeSpec().RemoveGate(otherSystemsGate)
			} else {
				n.NodeSpec().AddGate(otherSystemsGate)
			}
		})
	}
}

// stepUntilReleased steps the world until the sequencer has released node
// key (another system's gate may stay), at most 200 steps; it fails the
// test if it has not.
func (w *world) stepUntilReleased(key string) {
	w.t.Helper()
	for i := 0; i < 200 && Gated(w.nodes[w.name(key)]); i++ {
		w.step()
	}
	if Gated(w.nodes[w.name(key)]) {
		w.t.Fatalf("%s not released:\n%s", key, w.dump())
	}
}

// liftOtherSystemsGate removes another system's rollout gate from those of
// the nodes that carry it.
func (w *world) liftOtherSystemsGate(keys ...string) {
	for _, k := range keys {
		if n := w.nodes[w.name(k)]; n != nil && n.NodeSpec().HasGate(otherSystemsGate) {
			w.toggleOtherSystemsGate(k)
		}
	}
}

// crashOnTarget crashes node key for good on its current target (a bad
// build): only a release of another target mends it.
func (w *world) crashOnTarget(key string) {
	w.crash(key)
	name := w.name(key)
	if w.crashed[name] > 0 {
		w.crashed[name] = 2
		w.brokenTarget[name] = StampedTarget(w.nodes[name])
	}
}

// blip turns every pod of the nodes not Ready for a moment, as a readiness
// probe that fails once does: nothing fails, and the pods are Ready again by
// themselves (without rng: at the next look; with rng, after 1–3), whatever
// gates the node carries.
func (w *world) blip(keys ...string) {
	for _, k := range keys {
		name := w.name(k)
		if len(w.pods[name]) == 0 || w.crashed[name] > 0 || w.rolling[name] > 0 {
			continue // nothing Ready that could blip
		}
		for i := range w.pods[name] {
			w.pods[name][i].Conditions[string(corev1.PodReady)] = string(corev1.ConditionFalse)
		}
		w.blipped[name] = 1
		if w.rng != nil {
			w.blipped[name] = 1 + w.rng.IntN(3)
		}
		w.logf("readiness blip %s", k)
	}
}

// scaleUp has the StatefulSet of each node want one pod more (a replica
// count raised by hand or by an autoscaler): the StatefulSet creates it at
// its next look, through pod admission, on the target of the node's pods,
// and it becomes Ready by itself once schedulable. Until then the node is
// short of a pod (MissingPods).
func (w *world) scaleUp(keys ...string) {
	for _, k := range keys {
		name := w.name(k)
		if n := w.nodes[name]; n == nil || !Live(n) || len(w.pods[name]) == 0 || w.crashed[name] > 0 {
			continue // a crashed node is re-provisioned, not scaled
		}
		w.scaling[name]++
		if w.scaleUps == nil {
			w.scaleUps = map[string]int{}
		}
		w.scaleUps[name]++ // its spec.replicas, moved on
		w.logf("StatefulSet of %s scaled up", k)
	}
}

// lose deletes every pod of the nodes, and their StatefulSet creates them
// again only at its next look (evict recreates them at once): until then
// the node has no pod, and its StatefulSet wants one (MissingPods).
func (w *world) lose(keys ...string) {
	for _, k := range keys {
		name := w.name(k)
		if n := w.nodes[name]; n == nil || !Live(n) || len(w.pods[name]) == 0 {
			continue
		}
		delete(w.pods, name)
		delete(w.rolling, name)
		delete(w.blipped, name)
		delete(w.crashed, name)
		delete(w.brokenTarget, name)
		w.scaling[name] = 1
		w.logf("pods of %s lost", k)
	}
}

// evict deletes every pod of the nodes and recreates them at once, as a
// StatefulSet does after a node failure: no delay anywhere.
func (w *world) evict(keys ...string) {
	had := map[string]bool{}
	for _, k := range keys {
		name := w.name(k)
		had[k] = len(w.pods[name]) > 0
		delete(w.pods, name)
		// Nothing of the lost pods goes on: a node not recreated here (one
		// going down) must not keep a rollout counter that would stop the
		// operator from rolling it when it comes back.
		delete(w.rolling, name)
		delete(w.blipped, name)
	}
	for _, k := range keys {
		name := w.name(k)
		n := w.nodes[name]
		if n == nil || !Live(n) || !had[k] {
			continue
		}
		delete(w.crashed, name)
		delete(w.brokenTarget, name)
		w.createPods(name, w.lastHash[name])
		w.logf("pods of %s recreated%s", k, w.gatedSuffix(name))
	}
}

func (w *world) snapshot() *Snapshot { return w.snapshotOf(w.statefulSets()) }

// snapshotOf is the tenant as a fresh read finds it with sets for its
// nodes' StatefulSets: a test that moves a StatefulSet as the world does
// not (edited with its controller behind, made again) reads it so.
func (w *world) snapshotOf(sets []appsv1.StatefulSet) *Snapshot {
	s := &Snapshot{
		Tenant: Tenant{Namespace: "tenant", ClusterName: w.cluster}, Orders: w.orders,
		Nodes: w.nodes, Pods: w.pods, MissingPods: w.missingPods(), Now: w.now, ProgressDeadline: w.deadline, Grouping: w.grouping,
	}
	// As the fresh reads do: the StatefulSets of the nodes, and only the
	// workload of each node as it is now.
	if len(w.gone) > 0 {
		all := maps.Clone(w.pods)
		for name, g := range w.gone {
			all[name] = append(slices.Clone(all[name]), g.pods...)
		}
		s.Pods = CurrentPods(all, w.nodes, sets)
	}
	s.SetRevisions = setRevisions(sets, s)
	s.SetTemplates = setTemplates(sets, w.nodes)
	s.SetsConverged = setsConverged(s, sets)
	return s
}

// statefulSets are the nodes' StatefulSets as the fresh reads find them:
// one per node that has had pods, named after it and owned by it, its
// template on the target of the pods the operator last created, its
// current revision setCurrent, scaled to 0 while the node is down; and
// those of nodes deleted and created again that the garbage collector has
// not removed yet.
func (w *world) statefulSets() []appsv1.StatefulSet {
	var out []appsv1.StatefulSet
	for name, n := range w.nodes {
		if n.GetDeletionTimestamp() != nil || w.lastHash[name] == "" || w.gone[name] != nil {
			continue
		}
		sts := w.statefulSetOf(n, w.lastHash[name])
		sts.Status.CurrentRevision = w.setCurrent[name]
		if !Live(n) || w.scaledDown[name] {
			sts.Spec.Replicas = ptr.To[int32](0)
		}
		sts.Generation = w.setGeneration(name, *sts.Spec.Replicas)
		sts.Status.ObservedGeneration = sts.Generation
		out = append(out, sts)
	}
	for _, g := range w.gone {
		out = append(out, w.statefulSetOf(g.node, g.hash))
	}
	return out
}

// setGeneration is node name's StatefulSet's generation, moved on where
// its spec changed since it was last read: its template, its replicas, or
// a scale-up.
func (w *world) setGeneration(name string, replicas int32) int64 {
	if w.setGen == nil {
		w.setGen, w.setSpec = map[string]int64{}, map[string]string{}
	}
	if spec := fmt.Sprint(w.lastHash[name], replicas, w.scaleUps[name]); w.setSpec[name] != spec {
		w.setSpec[name] = spec
		w.setGen[name]++
	}
	return w.setGen[name]
}

// statefulSetOf is node n's StatefulSet with one replica, its template on
// target hash.
func (w *world) statefulSetOf(n v2alpha1.Node, hash string) appsv1.StatefulSet {
	sts := appsv1.StatefulSet{}
	sts.Name = n.GetName()
	sts.UID = setUID(n)
	sts.OwnerReferences = []metav1.OwnerReference{{
		APIVersion: v2alpha1.GroupVersion.String(), Kind: n.NodeKind(), Name: n.GetName(), UID: n.GetUID(), Controller: ptr.To(true),
	}}
	sts.Generation, sts.Status.ObservedGeneration = 1, 1
	sts.Spec.Replicas = ptr.To[int32](1)
	sts.Spec.Template.Labels = map[string]string{v2alpha1.LabelNode: n.GetName(), v2alpha1.LabelTargetHash: hash}
	sts.Status.CurrentRevision, sts.Status.UpdateRevision = hash, hash
	return sts
}

// setUID is the UID of node n's StatefulSet.
func setUID(n v2alpha1.Node) types.UID { return types.UID("sts-" + string(n.GetUID())) }

// missingPods are the pods the fresh reads find missing: those a test says
// are (missing) and those a scaled-up StatefulSet has yet to create.
func (w *world) missingPods() map[string]int {
	if len(w.scaling) == 0 {
		return w.missing
	}
	out := maps.Clone(w.scaling)
	for name, count := range w.missing {
		out[name] += count
	}
	return out
}

// createPods creates the node's pod for target hash through the pod
// admission webhook, which decides on the world as it is at that instant.
func (w *world) createPods(name, hash string) { w.createPod(name, hash, false) }

// createPod creates one pod of the node for target hash through the pod
// admission webhook: in place of the node's pods, or added to them.
// Its version and revision are those of the target hash names (its
// StatefulSet's template), not the node's spec: a node gated for a new
// target still runs, and makes again, pods of the old one.
func (w *world) createPod(name, hash string, add bool) {
	n := w.nodes[name]
	spec := w.specOfHash[hash]
	w.podSeq++
	pod := Pod{
		Name: fmt.Sprintf("%s-%d", name, w.podSeq), Version: spec.version, Revision: spec.revision,
		Hash: hash, Conditions: map[string]string{string(corev1.PodReady): string(corev1.ConditionFalse)},
		Owners:  []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "StatefulSet", Name: name, UID: setUID(n), Controller: ptr.To(true)}},
		Created: metav1.Time{Time: w.now},
	}
	// As the pod webhook admits it (PodMayStart): the pod rule, and the
	// node's release where the pod awaits it.
	if !w.podMayStart(name) || w.snapshot().AwaitsRelease(name, hash) {
		pod.Gates = []string{v2alpha1.GateSequencer}
	} else if w.oracle != nil {
		if ok, why := podsMayStartOracle(w, name, nil); !ok {
			w.t.Fatalf("tick %d: a new pod of %s was admitted schedulable while %s\n%s", w.tick, name, why, strings.Join(w.log, "\n"))
		}
	}
	delete(w.scaledDown, name)
	if add {
		w.pods[name] = append(w.pods[name], pod)
	} else {
		w.pods[name] = []Pod{pod}
		delete(w.blipped, name)
	}
	if w.setCurrent[name] == "" {
		w.setCurrent[name] = hash // a brand-new StatefulSet
	}
	w.lastHash[name] = hash
	w.rolling[name] = w.rollTicks
	if w.rng != nil {
		w.rolling[name] = 1 + w.rng.IntN(4)
	}
	if len(pod.Gates) == 0 {
		w.start(name, hash)
	}
}

// start records that node name's new pods, of target, became schedulable.
//
// It fails the test where the pods roll the node (DESIGN §4, §9): they
// start on a target other than the one its pods last started on, and the
// node is released neither for that target nor for its current one (once
// it is, its held pods of a superseded target start and are replaced as
// the operator rolls the release out: docs/sequencer.md, Recovery).
func (w *world) start(name, target string) {
	if w.lastRun == nil {
		w.lastRun = map[string]string{}
	}
	n := w.nodes[name]
	if last, ok := w.lastRun[name]; ok && target != "" && target != last && target != ReleasedTarget(n) && !released(n) {
		w.t.Fatalf("tick %d: %s's pods start on %s, rolling it without a release: its pods last ran %s, it is released for %s and stamped %s\n%s\n%s",
			w.tick, w.key(name), w.specOfHash[target].version, w.specOfHash[last].version,
			w.specOfHash[ReleasedTarget(n)].version, w.specOfHash[StampedTarget(n)].version, strings.Join(w.log, "\n"), w.dump())
	}
	w.lastRun[name] = target
	w.started = append(w.started, w.key(name))
	w.startedAt = append(w.startedAt, w.tick)
	w.startedTarget = append(w.startedTarget, target)
}

func (w *world) gatedSuffix(name string) string {
	if slices.ContainsFunc(w.pods[name], Pod.HeldBySequencer) {
		return " (SchedulingGated)"
	}
	return ""
}

// sequence plans once and applies the decisions as the reconciler does,
// checking each release — of a node and of a pod — against the
// independent oracle.
func (w *world) sequence() {
	if !w.scoped {
		w.sequenceOn(w.snapshot())
		return
	}
	w.seeConvergence()
	w.apply(w.planScoped())
	w.seenThisPass = nil
}

// sequenceOn plans once on s, the tenant as a fresh read finds it, and
// applies the decisions as sequence does, the oracle checking each release.
func (w *world) sequenceOn(s *Snapshot) {
	w.seeConvergence()
	w.apply(Plan(s))
	w.seenThisPass = nil
}

// cacheSnapshot is the tenant as the sequencer's cache shows it: its nodes
// and pods, no StatefulSet — a pod of one counts, as Gather counts it.
func (w *world) cacheSnapshot() *Snapshot {
	all := maps.Clone(w.pods)
	for name, g := range w.gone {
		all[name] = append(slices.Clone(all[name]), g.pods...)
	}
	// The cache keeps each node's annotations cut (CutForCache).
	nodes := cutCopies(w.nodes)
	return &Snapshot{
		Tenant: Tenant{Namespace: "tenant", ClusterName: w.cluster}, Orders: w.orders,
		Nodes: nodes, Pods: CurrentPods(all, nodes, nil), Now: w.now, ProgressDeadline: w.deadline, Grouping: w.grouping,
	}
}

// planScoped plans as the sequencer does with --scoped-reads: on the
// cache, with the workload of what a release rests on read fresh by name.
func (w *world) planScoped() []Decision {
	cached := w.cacheSnapshot()
	_, decisions, read, _, err := PlanOnScoped(cached,
		func(scope []string) (*Snapshot, Fallback, error) {
			return cached.WithWorkloadOf(w.snapshot(), scope), Fallback{}, nil
		},
		func() (*Snapshot, error) { return w.snapshot(), nil })
	require.NoError(w.t, err)
	if w.reads == nil {
		w.reads = map[string]int{}
	}
	w.reads[read]++
	return decisions
}

// seeConvergence notes, for the oracle, each node the pass about to plan
// finds Ready on the target it was released for: every pod Ready on it, as
// many as its StatefulSet wants. It is recorded once the pass's write for
// the node lands (or the node already says what the pass decided).
func (w *world) seeConvergence() {
	w.seenThisPass = map[string]string{}
	for name, n := range w.nodes {
		// A gated node is found Ready on the target the pass would release
		// it for (released, its rollout has converged already), or on the
		// target it was released for (that release's rollout converged).
		target := ReleasedTarget(n)
		if Gated(n) && len(w.pods[name]) > 0 && w.pods[name][0].Hash == StampedTarget(n) {
			target = StampedTarget(n)
		}
		if target == "" || !Gated(n) && target != StampedTarget(n) || len(w.pods[name]) == 0 || w.missing[name] > 0 || w.scaling[name] > 0 {
			continue
		}
		if !slices.ContainsFunc(w.pods[name], func(p Pod) bool {
			return p.Hash != target || p.Conditions[string(corev1.PodReady)] != string(corev1.ConditionTrue)
		}) {
			w.seenThisPass[name] = target
		}
	}
}

// apply applies a plan's decisions as the reconciler does, checking each
// release against the oracle.
func (w *world) apply(decisions []Decision) { w.applyCertified(decisions, decisions) }

// applyCertified applies decisions, part of a plan, checking each release
// against the drops of certificate (the whole plan the release rests on:
// Decision.CircularWaits).
func (w *world) applyCertified(decisions, certificate []Decision) {
	releasing := map[string]bool{}
	w.circular = map[string][]string{}
	for _, d := range certificate {
		if len(d.CircularWaits) > 0 {
			w.circular[d.Node] = d.CircularWaits
		}
	}
	for _, d := range decisions {
		if n := w.nodes[d.Node]; Gated(n) && !d.Gated && Live(n) {
			releasing[d.Node] = true
		}
	}
	for _, d := range decisions {
		if n := w.nodes[d.Node]; w.oracle != nil && d.Gated && Gated(n) && Live(n) && d.Condition.Reason == v2alpha1.ReasonChangeLanding &&
			!annotated(n, v2alpha1.AnnotationPauseRollout) && !newOracle(w, nil).landingHolds() {
			w.t.Fatalf("tick %d: %s held for a change landing while every node that counts carries the same rollout-id, or the landing timed out: %s\n%s\n%s",
				w.tick, d.Node, d.Condition.Message, strings.Join(w.log, "\n"), w.dump())
		}
		if w.oracle != nil && releasing[d.Node] {
			if ok, why := w.oracle(w, d.Node, releasing); !ok {
				w.t.Fatalf("tick %d: %s released while its requirements do not hold: %s\n%s\n%s", w.tick, d.Node, why, strings.Join(w.log, "\n"), w.dump())
			}
		}
		if w.oracle != nil && len(d.PodsToRelease) > 0 {
			if ok, why := podsMayStartOracle(w, d.Node, releasing); !ok {
				w.t.Fatalf("tick %d: pods of %s released while %s\n%s", w.tick, d.Node, why, strings.Join(w.log, "\n"))
			}
		}
	}
	releases := ReleasesAny(w.snapshot(), decisions)
	for _, d := range decisions {
		n := w.nodes[d.Node]
		if !d.Changed(n) {
			w.recordSeen(d.Node)
			continue
		}
		if was := Gated(n); was != d.Gated {
			if d.Gated {
				n.NodeSpec().AddGate(v2alpha1.GateSequencer)
			} else {
				n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
			}
			n.SetGeneration(n.GetGeneration() + 1)
			if d.RecordRelease {
				// Released again on the target it was released for before,
				// its StatefulSet and every pod made for it, that release's
				// rollout converged where anything could know it, or the
				// node brought back up on it (taken down since, its pods all
				// to be made again): nothing to roll, a recovery (DESIGN §4),
				// as the world knows it. One the change overtook before it
				// converged goes on.
				target := StampedTarget(n)
				again := ReleasedTarget(n) == target && w.lastHash[d.Node] == target &&
					!slices.ContainsFunc(w.pods[d.Node], func(p Pod) bool { return p.Hash != target }) &&
					(w.seenConverged[d.Node] == target || w.convergedSince[d.Node] == target || w.scaledDown[d.Node])
				setAnnotation(n, v2alpha1.AnnotationReleasedTarget, StampedTarget(n))
				setAnnotation(n, v2alpha1.AnnotationReleasedGeneration, strconv.FormatInt(n.GetGeneration(), 10))
				setAnnotation(n, v2alpha1.AnnotationReleasedAt, w.now.UTC().Format(time.RFC3339Nano))
				delete(n.GetAnnotations(), v2alpha1.AnnotationReleasedAfter)
				delete(n.GetAnnotations(), v2alpha1.AnnotationReleasedSetRevision)
				if d.ReleasedSetRevision != "" {
					setAnnotation(n, v2alpha1.AnnotationReleasedSetRevision, d.ReleasedSetRevision)
				}
				delete(w.convergedSince, d.Node)
				delete(w.seenConverged, d.Node)
				w.recordSeen(d.Node) // found converged as it was released
				if again {
					w.seenConverged[d.Node] = StampedTarget(n)
				}
				w.releasedBare[d.Node] = w.setCurrent[d.Node] == ""
				if w.genAtRelease == nil {
					w.genAtRelease = map[string]int64{}
				}
				w.genAtRelease[d.Node] = 0 // none recorded, or another StatefulSet's
				if at, ok := releasedSet(n); ok && at.uid == string(setUID(n)) {
					w.genAtRelease[d.Node] = at.generation
				}
				if w.setCurrent[d.Node] != w.lastHash[d.Node] {
					w.genAtRelease[d.Node] = 0 // a rolling update under way: its template is not what the node ran
				}
				if d.ReleasedConverged {
					d.ReleasedAfter = maps.Clone(d.ReleasedAfter)
					if d.ReleasedAfter == nil {
						d.ReleasedAfter = map[string]string{}
					}
					d.ReleasedAfter[d.Node] = convergenceKey(n)
				}
				if len(d.ReleasedAfter) > 0 {
					data, err := json.Marshal(d.ReleasedAfter)
					if err != nil {
						w.t.Fatal(err)
					}
					setAnnotation(n, v2alpha1.AnnotationReleasedAfter, string(data))
				}
				w.released++
			}
		}
		if d.RecordConverged {
			// As the reconciler writes it: the node's own entry joins
			// released-after.
			var after map[string]string
			_ = json.Unmarshal([]byte(n.GetAnnotations()[v2alpha1.AnnotationReleasedAfter]), &after)
			if after == nil {
				after = map[string]string{}
			}
			after[d.Node] = convergenceKey(n)
			data, err := json.Marshal(after)
			if err != nil {
				w.t.Fatal(err)
			}
			setAnnotation(n, v2alpha1.AnnotationReleasedAfter, string(data))
			w.recordSeen(d.Node) // the record landed, whatever the condition does
			w.logf("%s recorded converged on its released target", w.key(d.Node))
		}
		for i, p := range w.pods[d.Node] {
			if slices.Contains(d.PodsToRelease, p.Name) {
				w.pods[d.Node][i].Gates = slices.DeleteFunc(slices.Clone(p.Gates), func(g string) bool { return g == v2alpha1.GateSequencer })
				w.podsReleased++
				if len(w.pods[d.Node][i].Gates) == 0 {
					w.start(d.Node, p.Hash)
				}
			}
		}
		d.Condition.ObservedGeneration = n.GetGeneration()
		if d.KeepCondition {
			continue
		}
		if w.rng != nil && !releases && d.Condition.Reason == v2alpha1.ReasonRolloutComplete && w.rng.IntN(3) == 0 {
			// A RolloutComplete write that is lost (a failed write, the
			// sequencer stopping): a pass that releases anything writes its
			// records first and stops if one fails, so only a pass that
			// releases nothing can lose one.
			w.logf("%s RolloutComplete write lost", w.key(d.Node))
			continue
		}
		SetCondition(&n.NodeStatus().Conditions, d.Condition, w.now)
		w.recordSeen(d.Node)
		if d.Event != nil {
			w.logf("%s %s: %s", w.key(d.Node), d.Event.Reason, d.Event.Message)
		}
	}
}

// recordSeen records that the pass being applied found the node Ready on
// its released target, once the node holds what the pass wrote of it.
func (w *world) recordSeen(name string) {
	if target, ok := w.seenThisPass[name]; ok && ReleasedTarget(w.nodes[name]) == target {
		w.seenConverged[name] = target
	}
}

// operate runs the simulated Express operator and scheduler over every node.
func (w *world) operate() {
	w.collectGarbage()
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
		key := w.key(name)
		spec := n.NodeSpec()
		if w.blipped[name] > 0 {
			if w.blipped[name]--; w.blipped[name] == 0 {
				for i := range w.pods[name] {
					w.pods[name][i].Conditions[string(corev1.PodReady)] = string(corev1.ConditionTrue)
				}
				w.logf("%s Ready again", key)
			}
		}
		if w.scaling[name] > 0 && Live(n) {
			w.scaling[name]--
			w.createPod(name, w.lastHash[name], true)
			w.logf("StatefulSet of %s creates a pod%s", key, w.gatedSuffix(name))
		}
		schedulable := len(w.pods[name]) > 0 && !slices.ContainsFunc(w.pods[name], func(p Pod) bool { return len(p.Gates) > 0 })
		switch {
		case !Live(n):
			delete(w.setCurrent, name) // scaled to 0, or deleted: a StatefulSet of no replica records nothing
			delete(w.crashed, name)
			delete(w.brokenTarget, name)
			delete(w.rolling, name)
			delete(w.blipped, name)
			delete(w.scaling, name)
			if len(w.pods[name]) > 0 {
				delete(w.pods, name)
				w.logf("operator stops %s", key)
			}
			w.scaledDown[name] = true
			if n.GetDeletionTimestamp() != nil {
				delete(w.nodes, name)
				w.logf("%s deleted", key)
			}
		case w.gone[name] != nil:
			// Its StatefulSet cannot be created while the old one has the name.
		case w.crashed[name] > 1 && w.brokenTarget[name] != "" && w.brokenTarget[name] != StampedTarget(n) && !v2alpha1.IsGated(n):
			w.crashed[name] = 1 // released for a target that is not broken: mended at the next look
		case w.crashed[name] > 1 && w.brokenTarget[name] == "":
			w.crashed[name]--
		case w.crashed[name] == 1 && !v2alpha1.IsGated(n) && w.lastHash[name] != StampedTarget(n):
			delete(w.crashed, name)
			delete(w.brokenTarget, name)
			w.createPods(name, StampedTarget(n))
			w.logf("operator rolls %s to %s%s", key, spec.ExpressVersion, w.gatedSuffix(name))
		case w.crashed[name] == 1 && !v2alpha1.IsGated(n):
			delete(w.crashed, name)
			delete(w.brokenTarget, name)
			w.createPods(name, w.lastHash[name])
			w.logf("operator re-provisions %s%s", key, w.gatedSuffix(name))
		case w.rolling[name] > 0 && schedulable:
			if w.stuck[name] {
				continue // never becomes Ready
			}
			w.rolling[name]--
			if w.rolling[name] == 0 {
				delete(w.rolling, name)
				for i := range w.pods[name] {
					w.pods[name][i].Conditions[string(corev1.PodReady)] = string(corev1.ConditionTrue)
				}
				if w.missing[name] == 0 && w.scaling[name] == 0 {
					w.setCurrent[name] = w.lastHash[name]
					// The released rollout's, gated again for another
					// target or not: its StatefulSet records it.
					if w.lastHash[name] == ReleasedTarget(n) && !w.releasedBare[name] {
						w.convergedSince[name] = w.lastHash[name]
					}
				}
				w.logf("operator: %s Ready on %s", key, spec.ExpressVersion)
			}
		case w.rolling[name] > 0, v2alpha1.IsGated(n):
		case len(w.pods[name]) == 0 || w.lastHash[name] != StampedTarget(n):
			delete(w.crashed, name)
			delete(w.brokenTarget, name)
			w.createPods(name, StampedTarget(n))
			w.logf("operator rolls %s to %s%s", key, spec.ExpressVersion, w.gatedSuffix(name))
		}
	}
}

// settled: nothing pending anywhere and no rollout in flight.
func (w *world) settled() bool {
	if len(w.gone) > 0 {
		return false
	}
	s := w.snapshot()
	var pending []string
	for name, n := range w.nodes {
		// Behind a loop, a crashed node the sequencer holds is never
		// re-provisioned (not until it is let go), and pods held
		// scheduling-gated never start.
		crashed := w.crashed[name] > 0 && !(w.cyclesMaySettle && Gated(n))
		rolling := w.rolling[name] > 0 && !(w.cyclesMaySettle && slices.ContainsFunc(w.pods[name], Pod.HeldBySequencer))
		if rolling || crashed || w.blipped[name] > 0 || w.scaling[name] > 0 || n.GetDeletionTimestamp() != nil {
			return false
		}
		if s.hasPendingWork(name) {
			pending = append(pending, name)
		}
	}
	if len(pending) > 0 && w.cyclesMaySettle && w.settledBehindCycles(pending) {
		w.settledOnLoops++
		return true
	}
	return len(pending) == 0
}

// settledBehindCycles: the tenant cannot move on, by the oracle's reading
// of the world's truth, not the planner's: some nodes of pending are gated
// as DependencyCycle on a loop each of whose steps is a wait of its lists
// (genuineLoop), and every other one waits (gated, or its new pods held)
// for a need unmet on one of those, or on a node that itself so waits — a
// chain of waits that ends on a loop, not two nodes waiting on each other
// with no loop of the lists between them (a deadlock of the planner's).
// (It does not judge whether the planner should have broken the loop by
// the provisioning order: a loop of the user's lists that one wait for
// readiness runs through, held as a cycle, would settle here too. The
// release oracle judges every release the planner makes.)
func (w *world) settledBehindCycles(pending []string) bool {
	o := newOracle(w, nil)
	behind := map[string]bool{} // on a genuine loop, or waiting on a node behind one
	waits := map[string][]need{}
	for _, m := range pending {
		c := PrerequisitesCondition(w.nodes[m])
		if o.gated(m) && c != nil && c.Reason == v2alpha1.ReasonDependencyCycle {
			if !o.genuineLoop(c.Message) {
				return false
			}
			behind[m] = true
			continue
		}
		unmet, ok := o.unmet(m, o.upgradeMode(m))
		if !ok || len(unmet) == 0 {
			return false
		}
		waits[m] = unmet
	}
	if len(behind) == 0 {
		return false
	}
	for more := true; more; {
		more = false
		for m, unmet := range waits {
			if !behind[m] && slices.ContainsFunc(unmet, func(nd need) bool { return behind[nd.node] }) {
				behind[m], more = true, true
			}
		}
	}
	return len(behind) == len(pending)
}

// step runs one tick: sequencer and operator in turn (random order with rng).
func (w *world) step() {
	w.tick++
	w.now = w.now.Add(time.Second)
	if w.blips && w.rng != nil && w.rng.IntN(4) == 0 {
		var ready []string
		for name := range w.nodes {
			if w.snapshot().isReady(name) {
				ready = append(ready, w.key(name))
			}
		}
		slices.Sort(ready)
		if len(ready) > 0 {
			w.blip(ready[w.rng.IntN(len(ready))])
		}
	}
	if w.freezes && w.rng != nil && w.frozen != nil && w.rng.IntN(3) == 0 {
		w.refused += w.wake(*w.frozen)
		w.wakes++
		w.frozen = nil
	}
	if w.rng != nil && w.rng.IntN(2) == 0 {
		w.operate()
		w.sequence()
	} else {
		w.sequence()
		w.operate()
	}
	if w.freezes && w.rng != nil && w.frozen == nil && w.rng.IntN(4) == 0 {
		// Planned on what the operator just did, before the live
		// sequencer's next pass: a release it has not made yet.
		f := w.freeze()
		w.frozen = &f
	}
}

// run steps sequencer and operator until the tenant settles; it fails the
// test if that takes more than maxTicks.
func (w *world) run(maxTicks int) {
	w.t.Helper()
	for i := 0; i < maxTicks; i++ {
		w.step()
		if w.settled() {
			w.sequence() // record the final conditions
			return
		}
	}
	w.t.Fatalf("the tenant did not settle in %d ticks:\n%s\n%s", maxTicks, strings.Join(w.log, "\n"), w.dump())
}

// sinceThisPhase returns the rollouts started in the current phase of a
// scenario's change.
func (w *world) sinceThisPhase() string { return w.startedSince(w.phases[len(w.phases)-1]) }

// startedSince returns the rollouts started since mark.
func (w *world) startedSince(mark int) string { return strings.Join(w.started[mark:], " ") }

// startedExcept is startedSince without the nodes keys (nodes fought over
// or recreated while the rest rolls).
func (w *world) startedExcept(mark int, keys ...string) string {
	var rest []string
	for _, k := range w.started[mark:] {
		if !slices.Contains(keys, k) {
			rest = append(rest, k)
		}
	}
	return strings.Join(rest, " ")
}

func (w *world) condition(key string) *metav1.Condition {
	return PrerequisitesCondition(w.nodes[w.name(key)])
}

// dump describes every node for a failure message: its lists, gate, mode
// and pods.
func (w *world) dump() string {
	names := make([]string, 0, len(w.nodes))
	for name := range w.nodes {
		names = append(names, name)
	}
	slices.Sort(names)
	s := w.snapshot()
	var b strings.Builder
	for _, name := range names {
		n := w.nodes[name]
		list := func(ps []v2alpha1.Prerequisite) string {
			var keys []string
			for _, p := range ps {
				keys = append(keys, w.key(p.ExpressNode))
			}
			return "[" + strings.Join(keys, " ") + "]"
		}
		deps := "absent"
		if d := n.NodeSpec().DeploymentDependencies; d != nil {
			deps = "prov " + list(d.ProvisioningPrerequisites) + " upg " + list(d.UpgradePrerequisites)
		}
		fmt.Fprintf(&b, "%s: up=%v gated=%v mode=%s inFlight=%v %s defaulted=%q pods=%v\n", w.key(name), Live(n), Gated(n), s.mode(name), s.inFlight(name),
			deps, n.GetAnnotations()[v2alpha1.AnnotationDefaultedPrerequisites], w.pods[name])
	}
	return b.String()
}
