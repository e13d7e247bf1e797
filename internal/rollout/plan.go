package rollout

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// Decision is what the sequencer does about one node.
type Decision struct {
	// Node is the node's name.
	Node string
	// Gated is whether the node must carry the sequencer's gate.
	Gated bool
	// RecordRelease: the patch that removes the gate also records the
	// released target (a release of a live node, not the gate of a node
	// that went down or is being deleted).
	RecordRelease bool
	// ReleasedAfter, for a release, records the converged rollouts of the
	// prerequisites it relies on (name → convergence key), written in the
	// same patch.
	ReleasedAfter map[string]string
	// ReleasedConverged, for a release, is whether the release leaves the
	// operator nothing to roll (nothingToRoll): the patch records the
	// release's own rollout converged with the others (released-after).
	// Otherwise it reads as a rollout under way until a pass sees it
	// Ready, and a crash in between would let its new pods go as a
	// half-done rollout's, ahead of a predecessor that waits for it.
	ReleasedConverged bool
	// RecordConverged, for a node that stays gated, records that the
	// rollout of its latest release converged (its own entry in
	// released-after): it runs every pod Ready on the target it was
	// released for, and nothing recorded so yet — a change came before its
	// RolloutComplete, or before it converged. Should the change be
	// reverted, the node released again on that target is a recovery
	// (nothingToRoll) even if it crashed in between; without the record it
	// would go on as a rollout under way, ahead of a predecessor that waits
	// for it.
	RecordConverged bool
	// ReleasedSetRevision, for a release, records the node's StatefulSet
	// and its current revision (released-set-revision), written in the
	// same patch; empty when it has none.
	ReleasedSetRevision string
	// PodsToRelease are the node's pods whose sequencer scheduling gate is
	// removed.
	PodsToRelease []string
	// PodsWouldRelease are, in audit mode, the node's pods enforcing would
	// have held (AnnotationWouldHoldPod) whose gate the plan would remove
	// now: AnnotationWouldReleaseAt records it on each.
	PodsWouldRelease []string
	// Condition is the PrerequisitesReady condition the node must show
	// (type, status, reason, message, observedGeneration).
	Condition metav1.Condition
	// Event, when set, is worth an Event: the reason or the gate changed.
	Event *Event
	// Mode is the mode of a gated node, empty otherwise.
	Mode Mode
	// WaitingFor names the nodes the node waits for, in order.
	WaitingFor []string
	// CircularWaits, of a gated node, names the upgrade prerequisites
	// whose wait the pass dropped as circular (the provisioning order
	// wins): each lies on a loop of its own with every other node's
	// dropped (findWaits).
	CircularWaits []string
	// RecheckAfter asks for another look after this long: a released node
	// whose progress deadline is still ahead, a hold that ends by itself.
	RecheckAfter time.Duration
	// KeepCondition: the node keeps the condition it has for now; Condition
	// says what it would be (a landing hold not explained yet, or not
	// brought up to date while the apply goes on).
	KeepCondition bool
	// LoopsUnsure, the same on every decision of a pass, says why the
	// pass's loop searches were cut short, empty where none was:
	// LoopsOutOfBudget (every wait is kept: a crashed node on a loop does
	// not go first) or LoopsOutOfSteps (the wait whose search ran out is
	// kept) (loopsUnsure). Either way a rollout in flight's new pods wait
	// for its predecessors; nothing goes out of order.
	LoopsUnsure string
}

// Event is an Event to record on a node.
type Event struct {
	Type    string
	Reason  string
	Message string
}

// Changed reports whether applying the decision changes the node or its pods.
func (d Decision) Changed(n v2alpha1.Node) bool {
	if d.Gated != Gated(n) || d.RecordConverged || len(d.PodsToRelease) > 0 || len(d.PodsWouldRelease) > 0 {
		return true
	}
	if d.KeepCondition {
		return false
	}
	c := PrerequisitesCondition(n)
	return c == nil || c.Status != d.Condition.Status || c.Reason != d.Condition.Reason ||
		c.Message != d.Condition.Message || c.ObservedGeneration != d.Condition.ObservedGeneration
}

// ordinaryWaits are the reasons of a node simply waiting its turn.
var ordinaryWaits = []string{v2alpha1.ReasonSettling, v2alpha1.ReasonChangeLanding, v2alpha1.ReasonWaitingForPrerequisite}

// releasedReasons mark a rollout the sequencer released and that has not
// converged yet.
var releasedReasons = []string{v2alpha1.ReasonReleased, v2alpha1.ReasonPrerequisitesIgnored, v2alpha1.ReasonProgressDeadlineExceeded}

// planner holds one planning pass over a snapshot.
type planner struct {
	*Snapshot
	names   []string
	landing landing
	// dropUpgrade: for gated nodes in upgrade mode, the upgrade
	// prerequisites whose wait is
	// circular with a provisioning wait; they proceed by the provisioning
	// order (DESIGN §4).
	dropUpgrade map[string]map[string]bool
	// blockers of each waiting node, and the nodes it relies on.
	blockers map[string][]blocker
	reliesOn map[string][]string
	// candidates are gated nodes whose requirements hold; releasing are the
	// ones released in this pass.
	candidates map[string]bool
	releasing  map[string]bool
	// cycles maps each node in a wait-for loop to the loop.
	cycles map[string][]string
	// provisioning memoises provisioningOf, provisionedClosure the nodes
	// each node's provisioning waits for, directly or through others.
	provisioning       map[string][]string
	provisionedClosure map[string]map[string]bool
	// letGo memoises the waitGraph with held nodes let go, before (false)
	// and after (true) the releases of the pass are chosen.
	letGo map[bool]waitGraph
	// reqs memoises requirements: they depend only on the snapshot's
	// nodes, which one pass does not change.
	reqs map[reqsKey][]requirement
	// ahead memoises recoversAheadOfAnyChange: it depends on the snapshot
	// alone, and every round of findWaits and decideGated asks it.
	ahead map[string]bool
	// waits memoises wait with no node releasing: it depends on the
	// snapshot and dropUpgrade, so each round of findWaits starts it anew
	// (a round's drops change it), and after the last round it holds.
	waits map[reqsKey]waitResult
	// loopWork is the work the pass's loop searches have done, in waits
	// looked at (about): past maxLoopWorkPerPlan every wait is kept
	// (findWaits).
	loopWork int
	// unsure: a loop search of the pass answered no without trying every
	// way (loopsUnsure).
	unsure bool
}

// waitResult is what wait returns. Its slices are shared by every caller:
// they only read them.
type waitResult struct {
	blockers []blocker
	relies   []string
}

// Plan decides, for every node of the snapshot's tenant, whether it is gated,
// whether its held pods may schedule, and what its PrerequisitesReady
// condition says. It is pure: the same snapshot always gives the same
// decisions, sorted by node name. See doc.go for the rules.
func Plan(s *Snapshot) []Decision {
	p := newPlanner(s)
	p.findWaits()
	p.chooseReleases()
	decisions := make([]Decision, 0, len(p.names))
	for _, name := range p.names {
		d := p.decide(name)
		d.Event = eventFor(s.Nodes[name], d, p.landing)
		decisions = append(decisions, d)
	}
	if why := p.loopsUnsureWhy(); why != "" {
		for i := range decisions {
			decisions[i].LoopsUnsure = why
		}
	}
	return decisions
}

func newPlanner(s *Snapshot) *planner {
	p := &planner{Snapshot: s, landing: s.landingOf(), dropUpgrade: map[string]map[string]bool{},
		provisioning: map[string][]string{}, provisionedClosure: map[string]map[string]bool{}, letGo: map[bool]waitGraph{}, ahead: map[string]bool{}, reqs: map[reqsKey][]requirement{}, waits: map[reqsKey]waitResult{}}
	for name := range s.Nodes {
		p.names = append(p.names, name)
	}
	slices.Sort(p.names)
	return p
}

type reqsKey struct {
	name    string
	upgrade bool
}

// requirements are the snapshot's, worked out once per node and mode. The
// callers only read them.
func (p *planner) requirements(name string, upgrade bool) []requirement {
	k := reqsKey{name, upgrade}
	r, ok := p.reqs[k]
	if !ok {
		r = p.Snapshot.requirements(name, upgrade)
		p.reqs[k] = r
	}
	return r
}

// findWaits finds what every gated node and every recovering node waits for,
// letting the provisioning order win wherever an upgrade wait is circular
// with a provisioning wait, until no such circle is left.
//
// A wait is dropped only while it stays on a loop of its own: a loop that
// runs through another wait dropped too is no reason to drop it (fe2's wait
// on fe4, circular with crashed fe3, is dropped; be's wait on fe2, on a
// loop only through fe2's wait on fe4, is not). So the waits a tier finds
// circular are dropped only where each lies on a loop without the others
// (one of them where none does), and each round first takes back a drop
// made earlier that no longer lies on a loop with every other drop made:
// the drops that stand are those that each lie on a loop with all the
// others made.
//
// Where the pass's loop searches run out of their budget
// (maxLoopWorkPerPlan), every drop is taken back: a drop that stood when
// the searches stopped might not stand at the end of a search without
// bound, and with every wait kept no node goes before all it waits for.
func (p *planner) findWaits() {
	p.findDrops()
	if p.outOfLoopBudget() {
		clear(p.dropUpgrade)
		p.evaluateAll()
	}
}

// outOfLoopBudget reports whether the pass's loop searches ran out of
// their budget: every wait is kept (findWaits).
func (p *planner) outOfLoopBudget() bool { return p.loopWork >= maxLoopWorkPerPlan }

// loopsUnsure reports whether a wait of the pass may have been kept for
// want of a search, not for want of a loop: the searches ran out of their
// budget, or one ran out of its steps. A wait kept is a hold for a
// release, but, for podsMayStart's exception for a rollout in flight, one
// more way a predecessor's readiness may wait for it: a search without
// bound could find the loop and drop that wait — letting the crashed
// predecessor go first, the rollout's pods held for it — where the wait
// kept lets them start while it is down. So no such exception is made in
// the pass. Not only where the exception rests on such a wait: drops are
// made and taken back round by round, and which waits a search without
// bound would leave cannot be told from the waits kept unsure alone; the
// pods held are never out of order. The cost is to progress, in tenants
// whose lists defeat the search — dense explicit lists the validating
// webhook refuses (a definite loop): the default lists of 200 nodes, a
// crash included, search to the end.
func (p *planner) loopsUnsure() bool { return p.unsure || p.outOfLoopBudget() }

// loopsUnsureWhy says why the pass's loop searches were cut short, empty
// where none was (Decision.LoopsUnsure).
func (p *planner) loopsUnsureWhy() string {
	switch {
	case p.outOfLoopBudget():
		return LoopsOutOfBudget
	case p.unsure:
		return LoopsOutOfSteps
	}
	return ""
}

// findDrops is findWaits' search, round after round.
func (p *planner) findDrops() {
	var made []dropped
	for round := 0; !p.outOfLoopBudget(); round++ { // out of it, findWaits takes every drop back
		letGo := p.evaluateAll()
		if d, ok := p.unfounded(letGo, made); ok {
			made = p.takeBack(made, d)
			continue
		}
		if round > len(p.names) {
			return // out of rounds: the drops made stand, each on a loop of its own
		}
		more := p.nextDrops(letGo)
		if len(more) == 0 {
			return
		}
		for _, d := range more {
			p.drop(d)
		}
		made = append(made, more...)
	}
}

// dropped is an upgrade wait dropped: node's on on.
type dropped struct{ node, on string }

// evaluateAll works out, with the drops made so far, what every node waits
// for and the loops of held nodes, and returns the wait graph with held
// nodes let go (see waitEdges).
func (p *planner) evaluateAll() waitGraph {
	p.blockers, p.reliesOn, p.candidates = map[string][]blocker{}, map[string][]string{}, map[string]bool{}
	p.waits = map[reqsKey]waitResult{}
	for _, name := range p.names {
		p.evaluate(name)
	}
	p.cycles = p.findCycles(p.waitEdges(nil, false, false))
	// A wait is circular whatever holds the nodes on its loop for now:
	// a paused node, or one held by a change landing, waits for the
	// same nodes once let go (a crashed Backend goes first even while
	// fe1 is paused or its change still lands).
	return p.waitEdges(nil, true, false)
}

// nextDrops returns the circular upgrade waits of the narrowest tier that
// has any (see circularUpgradeWaits), each on a loop without the others'
// waits; where each lies on a loop only through another's, one of them:
// of a node whose provisioning the others wait for, else the first by
// name (provisionedAfter orders only the nodes the lists link).
func (p *planner) nextDrops(g waitGraph) []dropped {
	filter := g.loopFilter(readiness)
	for tier := range 3 {
		var found []dropped
		for _, name := range p.names {
			if len(p.blockers[name]) == 0 || !Gated(p.Nodes[name]) || p.mode(name) != ModeUpgrade {
				continue
			}
			for _, r := range p.circularUpgradeWaits(name, g, filter, tier) {
				if !p.dropUpgrade[name][r] {
					found = append(found, dropped{name, r})
				}
			}
		}
		if len(found) == 0 {
			continue
		}
		var alone []dropped
		for _, d := range found {
			if p.loopWork >= maxLoopWorkPerPlan {
				break // out of the pass's budget: no more is searched
			}
			p.loopWork += g.edges() // the graph made without the others' waits
			if p.loopThrough(g.without(found, d), vertex(stateTarget, d.on), vertex(stateRelease, d.node)) {
				alone = append(alone, d)
			}
		}
		if len(alone) > 0 {
			return alone
		}
		first := found[0]
		for _, d := range found[1:] {
			if p.provisionedAfter(first.node, d.node) {
				first = d
			}
		}
		return []dropped{first}
	}
	return nil
}

// unfounded returns the last drop made that no longer lies on a loop, with
// every other drop made (g is the wait graph of the drops made).
func (p *planner) unfounded(g waitGraph, made []dropped) (dropped, bool) {
	for _, d := range slices.Backward(made) {
		if !p.loopThrough(g, vertex(stateTarget, d.on), vertex(stateRelease, d.node)) {
			return d, true
		}
	}
	return dropped{}, false
}

// drop drops the upgrade wait d: the node proceeds by the provisioning
// order.
func (p *planner) drop(d dropped) {
	if p.dropUpgrade[d.node] == nil {
		p.dropUpgrade[d.node] = map[string]bool{}
	}
	p.dropUpgrade[d.node][d.on] = true
}

// takeBack restores the upgrade wait d: the node waits for it again.
func (p *planner) takeBack(made []dropped, d dropped) []dropped {
	delete(p.dropUpgrade[d.node], d.on)
	if len(p.dropUpgrade[d.node]) == 0 {
		delete(p.dropUpgrade, d.node)
	}
	return slices.DeleteFunc(made, func(m dropped) bool { return m == d })
}

// evaluate records what node name waits for, if it waits for anyone.
func (p *planner) evaluate(name string) {
	n := p.Nodes[name]
	if !Live(n) {
		return
	}
	if !Gated(n) {
		if p.recovering(name) {
			p.blockers[name], p.reliesOn[name] = p.wait(name, false, nil)
		}
		return
	}
	switch {
	case annotated(n, v2alpha1.AnnotationIgnorePrerequisites):
		p.candidates[name] = true
		return
	case annotated(n, v2alpha1.AnnotationPauseRollout):
		return
	case p.landing.hold && !p.recoversAheadOfAnyChange(name):
		return
	}
	p.blockers[name], p.reliesOn[name] = p.wait(name, p.mode(name) == ModeUpgrade, nil)
	if len(p.blockers[name]) == 0 {
		p.candidates[name] = true
	}
}

// recoversAheadOfAnyChange reports whether gated node x goes first
// whatever the change still landing turns out to be, so that its recovery
// need not wait for the rest of the landing (DESIGN §4: crash recovery
// never waits). It must not be released before what lands could put it
// after another node ("as if applied at once"), so:
//
//   - x cannot become Ready without its release (needsRelease);
//   - a node provisioned (a first rollout, or brought back on the target it
//     was released for) is ordered by its provisioning list alone: the
//     conditions below on that list are all it needs;
//   - the hold is a rollout-id landing that has reached x, and every node
//     that could be one of x's upgrade prerequisites once it has landed —
//     for a defaulted list every node before x in the whole upgrade order,
//     down ones included (the render may bring them up); for an explicit list the
//     nodes named and, through those that are down, what they name — has
//     landed (carries the newest rollout-id): their lists, targets and up
//     flags are final (a render may give a node lists that no longer need
//     x, and x would then wait for it);
//   - each of those that is live needs x Ready for its own provisioning
//     and is not rolling: x's waits on them are circular with x's own
//     readiness and the provisioning order wins;
//   - every node that could be one of x's provisioning prerequisites
//     (found the same way in the provisioning list), up or down, has
//     landed: a render that brings a down one back up makes x wait for it,
//     and one that takes an up one down makes x wait, through it, for what
//     its list names, as a render applied at once would (a tenant taken
//     down whole and brought back up by a render that lands fe1 first is
//     provisioned be first);
//   - so has every node that could be one of the provisioning
//     prerequisites of each upgrade prerequisite of x: those lists and up
//     flags are what makes x's wait on it circular.
//
// A settle hold (no rollout-id) cannot tell what has landed: it is short,
// and recovery waits for it.
func (p *planner) recoversAheadOfAnyChange(x string) bool {
	ahead, ok := p.ahead[x]
	if !ok {
		ahead = p.goesAheadOfTheLanding(x)
		p.ahead[x] = ahead
	}
	return ahead
}

func (p *planner) goesAheadOfTheLanding(x string) bool {
	if !p.needsRelease(x) || p.landing.newest == "" || p.Nodes[x].GetAnnotations()[v2alpha1.AnnotationRolloutID] != p.landing.newest {
		return false // x's own change may be still to land
	}
	if p.mode(x) == ModeProvisioning {
		// Provisioned (a first rollout, or brought back on the target it was
		// released for): only its provisioning list counts, at once as now.
		return p.landedAll(p.mayComeAfter(x, defaults.ProvisioningList))
	}
	for _, y := range p.mayUpgradeAfter(x) {
		n, ok := p.Nodes[y]
		if !ok || n.GetAnnotations()[v2alpha1.AnnotationRolloutID] != p.landing.newest {
			return false // missing, or not landed yet: what it will need is not known
		}
	}
	// Every node x's provisioning list reaches, up or down, has landed: a
	// render may bring a down one back up (x would wait for it) or take an
	// up one down (x would wait, through it, for what its list names).
	if !p.landedAll(p.mayComeAfter(x, defaults.ProvisioningList)) {
		return false
	}
	for _, r := range p.requirements(x, true) {
		if r.upToDate && (r.missing || p.inFlight(r.node) || !slices.Contains(p.provisioningOf(r.node), x)) {
			return false
		}
		// r's provisioning reaches x (the wait is circular) through lists
		// and up flags a render may still change: they have landed too.
		if r.upToDate && !p.landedAll(p.mayComeAfter(r.node, defaults.ProvisioningList)) {
			return false
		}
	}
	return true
}

// landedAll: every one of names that exists and is not being deleted
// carries the newest rollout-id.
func (p *planner) landedAll(names []string) bool {
	for _, y := range names {
		n, ok := p.Nodes[y]
		if ok && n.GetDeletionTimestamp() == nil && n.GetAnnotations()[v2alpha1.AnnotationRolloutID] != p.landing.newest {
			return false
		}
	}
	return true
}

// mayUpgradeAfter returns the nodes that could be upgrade prerequisites of
// x, whoever is up: for a defaulted list every node before x in the whole
// upgrade order (not reduced: down nodes may come back), for an explicit
// list the nodes it names and, through those that are down, what they may
// name in turn.
func (p *planner) mayUpgradeAfter(x string) []string { return p.mayComeAfter(x, defaults.UpgradeList) }

// mayComeAfter returns the nodes that could be prerequisites of x in list
// l, whoever is up (see mayUpgradeAfter).
func (p *planner) mayComeAfter(x string, l defaults.List) []string {
	var out []string
	seen := map[string]bool{x: true}
	var walk func(name string)
	walk = func(name string) {
		n := p.Nodes[name]
		var next []string
		if defaults.IsDefaulted(n, l) {
			k, ok := defaults.KeyOf(n)
			if !ok {
				return
			}
			byKey := map[defaults.Key]string{}
			var keys []defaults.Key
			for other, m := range p.Nodes {
				if mk, ok := defaults.KeyOf(m); ok && m.GetDeletionTimestamp() == nil {
					byKey[mk] = other
					keys = append(keys, mk)
				}
			}
			for _, prev := range l.Order(p.Orders).Sequence(keys) {
				if prev == k {
					break
				}
				next = append(next, byKey[prev])
			}
		} else {
			for _, pr := range l.Get(n.NodeSpec()) {
				next = append(next, pr.ExpressNode)
			}
		}
		for _, y := range next {
			if seen[y] {
				continue
			}
			seen[y] = true
			out = append(out, y)
			if m, ok := p.Nodes[y]; ok && !Live(m) {
				walk(y)
			}
		}
	}
	walk(x)
	return out
}

// wait checks node name's requirements and returns the unmet ones and every
// node it relies on.
func (p *planner) wait(name string, upgrade bool, releasing map[string]bool) ([]blocker, []string) {
	if releasing != nil {
		return p.waitNow(name, upgrade, releasing)
	}
	k := reqsKey{name, upgrade}
	w, ok := p.waits[k]
	if !ok {
		w.blockers, w.relies = p.waitNow(name, upgrade, nil)
		p.waits[k] = w
	}
	return w.blockers, w.relies
}

// waitNow is wait, worked out.
func (p *planner) waitNow(name string, upgrade bool, releasing map[string]bool) ([]blocker, []string) {
	var blockers []blocker
	var relies []string
	for _, r := range p.requirements(name, upgrade) {
		if r.upToDate && p.dropUpgrade[name][r.node] {
			continue // circular with a provisioning wait: the provisioning order wins
		}
		if !slices.Contains(relies, r.node) {
			relies = append(relies, r.node)
		}
		if b, blocked := p.check(r, releasing); blocked {
			blockers = append(blockers, b)
		}
	}
	return blockers, relies
}

// chooseReleases picks the candidates released in this pass: a node about to
// roll stops being Ready, so no node is released in the same pass as a node
// it relies on. Nodes released regardless of prerequisites go first, then
// nodes no other candidate relies on before those that rely on candidates.
func (p *planner) chooseReleases() {
	p.releasing = map[string]bool{}
	var order []string
	for _, name := range p.names {
		if p.candidates[name] {
			order = append(order, name)
		}
	}
	rank := func(name string) int {
		if annotated(p.Nodes[name], v2alpha1.AnnotationIgnorePrerequisites) {
			return -1
		}
		count := 0
		for _, r := range p.reliesOn[name] {
			if p.candidates[r] {
				count++
			}
		}
		return count
	}
	slices.SortStableFunc(order, func(a, b string) int { return rank(a) - rank(b) })
	for _, c := range order {
		conflict := slices.ContainsFunc(p.reliesOn[c], func(r string) bool { return p.releasing[r] })
		for r := range p.releasing {
			conflict = conflict || slices.Contains(p.reliesOn[r], c)
		}
		if !conflict || annotated(p.Nodes[c], v2alpha1.AnnotationIgnorePrerequisites) {
			p.releasing[c] = true
		}
	}
}

// PodsMayStart reports whether new pods of node name may be scheduled now:
// the node is not live, is released regardless of its prerequisites, or its
// live provisioning-predecessors are Ready — or, for a node in a released
// rollout that has not converged, holding its pods would wait for a node
// that itself waits for it (a half-done rollout is finished before a
// predecessor whose own rollout waits for it). Otherwise it returns the
// blockers' message. The pod admission webhook and the sequencer decide
// with it.
func PodsMayStart(s *Snapshot, name string) (bool, string) {
	p := newPlanner(s)
	if p.inFlight(name) {
		p.findWaits()
	}
	ok, blockers := p.podsMayStart(name, nil)
	if ok {
		return true, ""
	}
	return false, nearest(blockers).message
}

func (p *planner) podsMayStart(name string, releasing map[string]bool) (bool, []blocker) {
	if p.SharedNames[name] {
		return false, []blocker{sharedNameBlocker(name)}
	}
	n := p.Nodes[name]
	if !Live(n) || annotated(n, v2alpha1.AnnotationIgnorePrerequisites) || releasing[name] {
		return true, nil
	}
	blockers, _ := p.wait(name, false, releasing)
	if len(blockers) == 0 {
		return true, nil
	}
	if p.inFlight(name) && !p.loopsUnsure() && p.eachMayWaitFor(blockers, name, releasing) {
		return true, nil // every predecessor still not Ready may wait for this rollout: holding it could hold them all
	}
	return false, blockers
}

// eachMayWaitFor reports whether the readiness of every node of blockers
// may wait for node target (readinessMayWaitFor).
func (p *planner) eachMayWaitFor(blockers []blocker, target string, releasing map[string]bool) bool {
	return !slices.ContainsFunc(blockers, func(b blocker) bool { return !p.readinessMayWaitFor(b, target, releasing) })
}

// readinessMayWaitFor reports whether node from may not become Ready until
// node target does: its readiness waits, through any states of other nodes,
// for a state of target (see waitEdges) — for its release when it needs one
// to be Ready (paused or held for a change landing, it waits for the same
// nodes once let go), for its new pods when the pod rule decides on them. A
// node whose pods exist and do not fail becomes Ready by itself: it waits
// for no one, and a rollout that needs it Ready waits for it.
func (p *planner) readinessMayWaitFor(b blocker, target string, releasing map[string]bool) bool {
	if b.pinned && !b.pinAhead {
		return false // nothing meets the pin: no loop through it
	}
	start := b.waitVertex()
	after := releasing != nil
	g, ok := p.letGo[after]
	if !ok {
		g = p.waitEdges(releasing, true, true)
		p.letGo[after] = g
	}
	return g.reachesNode(start, target)
}

// decide turns the pass's findings into node name's decision.
func (p *planner) decide(name string) Decision {
	n := p.Nodes[name]
	d := Decision{Node: name, CircularWaits: slices.Sorted(maps.Keys(p.dropUpgrade[name]))}
	set := d.setter(n)
	podsOK, podBlockers := p.podsMayStart(name, p.releasing)
	if podsOK {
		for _, pod := range p.Pods[name] {
			if pod.HeldBySequencer() && !p.AwaitsRelease(name, pod.Hash) {
				d.PodsToRelease = append(d.PodsToRelease, pod.Name)
			}
		}
	}
	switch {
	case n.GetDeletionTimestamp() != nil:
		set(false, metav1.ConditionTrue, v2alpha1.ReasonNodeDown, "%s is being deleted and takes no part in the order", name)
	case !isUp(n):
		set(false, metav1.ConditionTrue, v2alpha1.ReasonNodeDown, "%s is intentionally down (up: false) and takes no part in the order", name)
	case Gated(n):
		p.decideGated(name, &d)
		d.RecordConverged = d.Gated && p.convergedUnrecorded(name)
	case p.converged(name):
		msg := "Ready on " + describeTarget(n)
		if p.onFallback(name) {
			msg += fmt.Sprintf(" (judged by the version and revision labels: its pods carry no %s label)", v2alpha1.LabelTargetHash)
		}
		if set := p.setNamedOtherwise(name); set != "" {
			msg += fmt.Sprintf(" (its pods' StatefulSet %s is not named after it, as the operator contract asks: it cannot be read by name)", set)
		}
		if p.landing.notRendered[name] {
			msg += notRenderedNote(p.landing.renderID)
		}
		set(false, metav1.ConditionTrue, v2alpha1.ReasonRolloutComplete, "%s", msg)
	case p.inFlight(name) && !podsOK && slices.ContainsFunc(p.Pods[name], Pod.HeldBySequencer):
		d.WaitingFor = blockerNodes(podBlockers)
		why := nearest(podBlockers).message
		if p.loopsUnsure() && !p.SharedNames[name] && p.eachMayWaitFor(podBlockers, name, p.releasing) {
			why += unsureLoopsNote
		}
		set(false, metav1.ConditionFalse, v2alpha1.ReasonRolloutPodsHeld, "rolling out %s (released); new pods held scheduling-gated: %s",
			describeTarget(n), why)
	case p.inFlight(name):
		p.inProgress(n, &d)
		if note := "; " + sharedNameBlocker(name).message; p.SharedNames[name] && !strings.HasSuffix(d.Condition.Message, note) {
			d.Condition.Message += note // once: inProgress keeps the message it finds
		}
	case p.cycles[name] != nil:
		d.WaitingFor = blockerNodes(podBlockers)
		set(false, metav1.ConditionFalse, v2alpha1.ReasonDependencyCycle, "recovering: new pods held scheduling-gated; %s", p.cycleMessage(name))
	case !podsOK:
		// The blocker's reason, as for a gated node: a missing or paused
		// prerequisite says so (Argo CD Degraded or Suspended, the alert).
		d.WaitingFor = blockerNodes(podBlockers)
		b := nearest(podBlockers)
		set(false, metav1.ConditionFalse, b.reason, "recovering: new pods held scheduling-gated; %s", b.message)
	default:
		set(false, metav1.ConditionTrue, v2alpha1.ReasonRecovering, "recovering on %s: pods may schedule, %s", describeTarget(n), describeMet(p.reliesOn[name]))
	}
	return d
}

// decideGated decides a gated live node: ignore, pause, landing, waits,
// release — in that order.
func (p *planner) decideGated(name string, d *Decision) {
	n := p.Nodes[name]
	set := d.setter(n)
	d.Mode = p.mode(name)
	what := string(d.Mode) + " of " + describeTarget(n)
	if dropped := p.dropUpgrade[name]; len(dropped) > 0 {
		what += " by the provisioning order (" + describeCircular(slices.Sorted(maps.Keys(dropped))) + ")"
	}
	switch {
	case p.SharedNames[name]:
		// None of its pods could be told to be its own, nor let go.
		set(true, metav1.ConditionFalse, v2alpha1.ReasonNameShared, "%s", sharedNameBlocker(name).message)
	case annotated(n, v2alpha1.AnnotationIgnorePrerequisites):
		d.RecordRelease = true
		set(false, metav1.ConditionTrue, v2alpha1.ReasonPrerequisitesIgnored,
			"released for %s without checking prerequisites (%s)", what, v2alpha1.AnnotationIgnorePrerequisites)
	case annotated(n, v2alpha1.AnnotationPauseRollout):
		set(true, metav1.ConditionFalse, v2alpha1.ReasonRolloutPaused, "held by %s", v2alpha1.AnnotationPauseRollout)
	case p.landing.hold && !p.recoversAheadOfAnyChange(name):
		set(true, metav1.ConditionFalse, p.landing.reason, "%s", p.landing.message)
		d.RecheckAfter = p.landing.recheckAfter
		until := p.landing.quietUntil // explained if it lasts: see landingQuiet
		if c := PrerequisitesCondition(n); c != nil && c.Reason == p.landing.reason {
			until = p.landing.busyUntil // brought up to date once the apply pauses
		}
		if quiet := until.Sub(p.Now); quiet > 0 && len(d.PodsToRelease) == 0 {
			d.KeepCondition = true
			if d.RecheckAfter == 0 || quiet < d.RecheckAfter {
				d.RecheckAfter = quiet
			}
		}
	case p.cycles[name] != nil:
		d.WaitingFor = blockerNodes(p.blockers[name])
		set(true, metav1.ConditionFalse, v2alpha1.ReasonDependencyCycle, "%s", p.cycleMessage(name))
	case len(p.blockers[name]) > 0:
		d.WaitingFor = blockerNodes(p.blockers[name])
		b := nearest(p.blockers[name])
		set(true, metav1.ConditionFalse, b.reason, "%s", b.message)
	case p.releasing[name]:
		d.RecordRelease = true
		d.ReleasedAfter = p.convergedRecords(n, p.reliesOn[name])
		d.ReleasedConverged = p.nothingToRoll(name)
		d.ReleasedSetRevision = p.SetRevisions[name]
		msg := fmt.Sprintf("released for %s: %s", what, describeMet(p.reliesOn[name]))
		switch {
		case p.landing.hold:
			msg += "; it cannot become Ready without its release, and the nodes that could come before it have landed: it goes first whatever the rest of the change turns out to be, so its recovery does not wait for it"
		case p.landing.timedOut != "":
			msg += "; " + p.landing.timedOut
		}
		set(false, metav1.ConditionTrue, v2alpha1.ReasonReleased, "%s", msg)
	default: // a candidate that relies on a node released in this pass
		blockers, _ := p.wait(name, p.mode(name) == ModeUpgrade, p.releasing)
		for r := range p.releasing {
			if slices.Contains(p.reliesOn[r], name) {
				blockers = append(blockers, blocker{node: r, reason: v2alpha1.ReasonWaitingForPrerequisite,
					message: fmt.Sprintf("waiting for %s: it is being released now and relies on %s being Ready", r, name)})
			}
		}
		slices.SortFunc(blockers, func(a, b blocker) int { return strings.Compare(a.node, b.node) })
		d.WaitingFor = blockerNodes(blockers)
		b := nearest(blockers)
		set(true, metav1.ConditionFalse, b.reason, "%s", b.message)
	}
}

// nearest returns the blocker a condition names: the last in order — right
// before the node, so it changes only when that node moves, not at every
// step of the rollout ahead of it — unless a prerequisite that will not go
// on by itself (missing, a pin nothing meets), else a paused one, says
// more.
func nearest(blockers []blocker) blocker {
	if len(blockers) == 0 {
		return blocker{}
	}
	for _, b := range blockers {
		if IsStuckReason(b.reason) {
			return b
		}
	}
	for _, b := range blockers {
		if b.reason != v2alpha1.ReasonWaitingForPrerequisite {
			return b
		}
	}
	return blockers[len(blockers)-1]
}

// blockerNodes lists the nodes of the blockers, each once, in order.
func blockerNodes(blockers []blocker) []string {
	var out []string
	for _, b := range blockers {
		if !slices.Contains(out, b.node) {
			out = append(out, b.node)
		}
	}
	return out
}

// setter returns a function that sets the decision's gate and condition.
func (d *Decision) setter(n v2alpha1.Node) func(bool, metav1.ConditionStatus, string, string, ...any) {
	return func(gate bool, status metav1.ConditionStatus, reason, format string, args ...any) {
		d.Gated = gate
		d.Condition = metav1.Condition{
			Type: v2alpha1.ConditionPrerequisitesReady, Status: status, Reason: reason,
			Message: fmt.Sprintf(format, args...), ObservedGeneration: n.GetGeneration(),
		}
	}
}

// inProgress watches a released node against its progress deadline.
func (p *planner) inProgress(n v2alpha1.Node, d *Decision) {
	set := d.setter(n)
	cur := PrerequisitesCondition(n)
	if cur == nil || !slices.Contains(releasedReasons, cur.Reason) {
		// The release was recorded but its condition was lost (a failed
		// status write): say so now and time the deadline from here.
		set(false, metav1.ConditionTrue, v2alpha1.ReasonReleased, "rolling out %s (released)", describeTarget(n))
		d.RecheckAfter = p.ProgressDeadline
		return
	}
	elapsed := p.Now.Sub(cur.LastTransitionTime.Time)
	if cur.Reason == v2alpha1.ReasonProgressDeadlineExceeded || (p.ProgressDeadline > 0 && elapsed >= p.ProgressDeadline) {
		set(false, metav1.ConditionFalse, v2alpha1.ReasonProgressDeadlineExceeded,
			"released but not Ready on %s within %s: %d/%d pods Ready on target; its dependents stay gated",
			describeTarget(n), p.ProgressDeadline, p.readyOnTarget(n.GetName()), len(p.Pods[n.GetName()]))
		return
	}
	set(false, cur.Status, cur.Reason, "%s", cur.Message)
	d.Condition.ObservedGeneration = cur.ObservedGeneration
	if p.ProgressDeadline > 0 {
		d.RecheckAfter = p.ProgressDeadline - elapsed
	}
}

// describeMet says which prerequisites (nodes, each once) a released node
// found ready.
func describeMet(met []string) string {
	switch {
	case len(met) == 0:
		return "no live prerequisites"
	case len(met) > 4:
		return fmt.Sprintf("%s and %d more ready", strings.Join(met[:3], ", "), len(met)-3)
	}
	return strings.Join(met, ", ") + " ready"
}

// describeCircular says which upgrade waits of a node released by the
// provisioning order were circular (dropped, sorted; each once).
func describeCircular(dropped []string) string {
	switch {
	case len(dropped) == 1:
		return "its upgrade wait for " + dropped[0] + " was circular"
	case len(dropped) > 4:
		return fmt.Sprintf("its upgrade waits for %s and %d more were circular", strings.Join(dropped[:3], ", "), len(dropped)-3)
	}
	return "its upgrade waits for " + strings.Join(dropped, ", ") + " were circular"
}

// podsReleasedNote and podsWouldReleaseNote open what an Event adds about
// the pods let go (withPods), in enforce and in audit.
const (
	podsReleasedNote     = "scheduling gate removed from"
	podsWouldReleaseNote = "audit: enforcing would now remove the scheduling gate from"
)

// outOfBudgetNote ends the message of a node on a loop when the pass's
// loop searches ran out of their budget (cycleMessage).
const outOfBudgetNote = "; the tenant's lists make more loops than one pass searches (every wait is kept: a crashed node on one does not go first)"

// unsureLoopsNote ends the message of a rollout in flight whose new pods
// are held though every predecessor they wait for may wait for it: the
// exception that lets them start rests on loops a search did not follow
// to their end (loopsUnsure).
const unsureLoopsNote = "; they may wait for this rollout, but through loops of the tenant's lists longer than one pass searches, so its pods are not let start before them (" + v2alpha1.AnnotationIgnorePrerequisites + " on this node lets them)"

// withPods is message with what it adds about pods: note, then their names.
func withPods(message, note string, pods []string) string {
	return fmt.Sprintf("%s (%s %s)", message, note, strings.Join(pods, ", "))
}

func eventFor(n v2alpha1.Node, d Decision, l landing) *Event {
	if d.KeepCondition {
		return nil
	}
	cur := PrerequisitesCondition(n)
	gateChanged := d.Gated != Gated(n)
	if !gateChanged && cur != nil && cur.Reason == d.Condition.Reason && len(d.PodsToRelease) == 0 {
		return nil
	}
	if d.Condition.Reason == v2alpha1.ReasonRolloutComplete {
		// Finishing is no wait and no release: the condition says it, and
		// the release Event of the next node in line names this one Ready.
		return nil
	}
	if !gateChanged && len(d.PodsToRelease) == 0 && cur != nil && slices.Contains(ordinaryWaits, cur.Reason) && slices.Contains(ordinaryWaits, d.Condition.Reason) {
		return nil // still in line: the first Event of the wait said so
	}
	if !gateChanged && len(d.PodsToRelease) == 0 && d.Condition.Reason == v2alpha1.ReasonReleased {
		return nil // the release's Event came with the gate: this only catches the condition up
	}
	typ := corev1.EventTypeNormal
	switch {
	case slices.Contains(stuckReasons, d.Condition.Reason):
		typ = corev1.EventTypeWarning
	case d.Condition.Reason == v2alpha1.ReasonReleased:
		typ = l.eventType()
	}
	msg := d.Condition.Message
	if len(d.PodsToRelease) > 0 {
		msg = withPods(msg, podsReleasedNote, d.PodsToRelease)
	}
	return &Event{Type: typ, Reason: d.Condition.Reason, Message: msg}
}
