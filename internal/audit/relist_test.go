package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A broken watch of Frontends is listed again. The list's objects reach
// the handler in no order of revision, and the informer takes the list's
// revision as synced only after queueing them all: the revisions handled
// jump ahead of Frontends still to come. A pod created in the gap, whose
// node's release only the list shows, must not be judged on the node as
// it was before the break.
func TestAListedAgainInNoOrderHidesNoReleaseFromTheJudge(t *testing.T) {
	a := &Auditor{judge: NewJudge(), handled: map[string]uint64{}, broken: map[string]brokenWatch{}}
	other := NodeKey{Namespace: "other", Name: "other-fe1"}
	feed := func(rv uint64, k NodeKey, held bool, synced uint64) {
		a.seen(v2alpha1.KindFrontend, rv, synced)
		a.judge.Node(rv, k, NodeSeen{Kind: v2alpha1.KindFrontend, UID: k.Name, Held: held, Target: "v2"})
	}
	set(5, "v1")(a.judge)
	feed(10, fe1, true, 10)
	a.handled[streamSets], a.handled[streamPods] = 1000, 1000
	known := func(NodeKey) uint64 { return a.handled[v2alpha1.KindFrontend] }

	// The watch breaks at 10; fe1 is released at 20 and its pod made at
	// 42, the release not delivered by the Frontends' watch.
	a.broken[v2alpha1.KindFrontend] = brokenWatch{from: 10, synced: 10}
	pod(42, "acme-fe1-0", "v2", true)(a.judge)
	// The list, as of 50, hands over two other Frontends (40, 48) before
	// fe1's release (20); the informer has not yet moved its synced
	// revision to 50.
	feed(40, other, false, 10)
	feed(48, NodeKey{Namespace: "other", Name: "other-fe2"}, false, 10)
	assert.Empty(t, a.judge.Settle(known), "the pod is not judged on fe1 as the break left it")
	feed(20, fe1, false, 10)
	feed(45, other, false, 50)
	assert.Empty(t, a.judge.Settle(known))
	assert.Equal(t, uint64(1), a.judge.Blinded, "made in revisions the broken watch may have hidden: counted as not judged")
	assert.NotContains(t, a.broken, v2alpha1.KindFrontend, "mended once the informer synced the list")

	// Past the list, judged as ever: fe1 gated again at 60, a pod made for
	// its new target at 70 is a violation.
	a.judge.Node(60, fe1, NodeSeen{Kind: v2alpha1.KindFrontend, UID: fe1.Name, Held: true, Target: "v3"})
	a.seen(v2alpha1.KindFrontend, 60, 60)
	pod(70, "acme-fe1-1", "v3", true)(a.judge)
	a.handled[v2alpha1.KindFrontend] = 70
	found := a.judge.Settle(known)
	if assert.Len(t, found, 1) {
		assert.Equal(t, KindRolledWhileGated, found[0].Kind)
	}
}
