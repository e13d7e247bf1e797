package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// relisting is an auditor whose streams have each been listed once, as at
// the start, with fe1 gated for v2 at 10 and its StatefulSet on v1.
func relisting() (*Auditor, func(rv uint64, k NodeKey, held bool)) {
	a := &Auditor{judge: NewJudge(), handled: map[string]uint64{}, listedOnce: map[string]bool{}, listRV: map[string]uint64{}}
	for _, s := range []string{v2alpha1.KindFrontend, streamPods, streamSets} {
		a.relisted(s, 0, 1)
	}
	feed := func(rv uint64, k NodeKey, held bool) {
		a.seen(v2alpha1.KindFrontend, rv)
		a.judge.Node(rv, k, NodeSeen{Kind: v2alpha1.KindFrontend, UID: k.Name, Held: held, Target: "v2"})
	}
	set(5, "v1")(a.judge)
	feed(10, fe1, true)
	a.handled[streamSets], a.handled[streamPods] = 1000, 1000
	return a, feed
}

func (a *Auditor) knownThroughFrontends(NodeKey) uint64 { return a.handled[v2alpha1.KindFrontend] }

// A watch of Frontends ends with 410 Gone (a kube-apiserver restarted):
// client-go's reflector lists again, without a word to the watch error
// handler. The list's objects reach the handler in no order of revision,
// so the revisions handled jump ahead of Frontends still to come. A pod
// created in the gap, whose node's release only the list shows, must not
// be judged on the node as it was before the break.
func TestAListAfterABrokenWatchHidesNoReleaseFromTheJudge(t *testing.T) {
	a, feed := relisting()
	other := NodeKey{Namespace: "other", Name: "other-fe1"}
	// fe1 is released at 20 and its pod made at 42; the watch broke after
	// 10 and the list that mends it is read at 50.
	pod(42, "acme-fe1-0", "v2", true)(a.judge)
	a.relisted(v2alpha1.KindFrontend, 10, 50)
	// The list hands over two other Frontends (40, 48) before fe1 (20).
	feed(40, other, false)
	feed(48, NodeKey{Namespace: "other", Name: "other-fe2"}, false)
	assert.Empty(t, a.judge.Settle(a.knownThroughFrontends), "the pod is not judged on fe1 as the break left it")
	feed(20, fe1, false)
	assert.Empty(t, a.judge.Settle(a.knownThroughFrontends))
	assert.Equal(t, uint64(1), a.judge.Blinded, "made in revisions the broken watch may have hidden: counted as not judged")

	// Past the list, judged as ever: fe1 gated again at 60, a pod made for
	// its new target at 70 is a violation.
	a.judge.Node(60, fe1, NodeSeen{Kind: v2alpha1.KindFrontend, UID: fe1.Name, Held: true, Target: "v3"})
	a.seen(v2alpha1.KindFrontend, 60)
	pod(70, "acme-fe1-1", "v3", true)(a.judge)
	a.handled[v2alpha1.KindFrontend] = 70
	found := a.judge.Settle(a.knownThroughFrontends)
	if assert.Len(t, found, 1) {
		assert.Equal(t, KindRolledWhileGated, found[0].Kind)
	}
}

// A list that finds nothing changed hands no object to the handler (each
// is a sync, dropped without a resync period): the next event, after the
// list, is judged as ever.
func TestAnEventAfterAListThatChangedNothingIsJudged(t *testing.T) {
	a, _ := relisting()
	a.relisted(streamPods, 8, 50)
	a.seen(streamPods, 60)
	pod(60, "by-hand", "v2", false)(a.judge)
	a.judge.PodsThrough = 60
	a.judge.CloseBlind(func(s string) uint64 { return a.handled[s] })
	found := a.judge.Settle(everything)
	if assert.Len(t, found, 1, "made after the list: not blind") {
		assert.Equal(t, KindPodWhileGated, found[0].Kind)
	}
}

// The blind span of a node stream's list is kept until that stream has
// handled an event past it — every object of the list — however far the
// pods' watch has moved on: a Frontend of the list handled late still
// sees it, and its hold counts from after it.
func TestABlindSpanOutlivesThePodsWatchUntilItsListIsFedWhole(t *testing.T) {
	a, feed := relisting()
	// The Frontends' watch broke after 10. Unseen: fe1 released (20),
	// rolled (22, 25), gated for v3 (28) and back to v2 (30). Listed at 50.
	a.relisted(v2alpha1.KindFrontend, 10, 50)
	set(22, "v2")(a.judge)
	podGone(24, "acme-fe1-0")(a.judge)
	pod(25, "acme-fe1-0", "v2", true)(a.judge)
	feed(48, NodeKey{Namespace: "other", Name: "other-fe1"}, false)
	a.judge.PodsThrough = 55
	a.judge.CloseBlind(func(s string) uint64 { return a.handled[s] })
	a.judge.Settle(a.knownThroughFrontends)
	feed(35, fe1, true) // fe1's object of the list, handled late
	podGone(60, "acme-fe1-0")(a.judge)
	pod(61, "acme-fe1-0", "v2", true)(a.judge)
	a.handled[v2alpha1.KindFrontend], a.judge.PodsThrough = 70, 70
	a.judge.CloseBlind(func(s string) uint64 { return a.handled[s] })
	assert.Empty(t, a.judge.Settle(a.knownThroughFrontends),
		"the StatefulSet making up a pod of v2, which fe1 ran when the hold seen after the list began")
}
