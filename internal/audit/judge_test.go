package audit

import (
	"math"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var fe1 = NodeKey{Namespace: "acme", Name: "acme-fe1"}

// step feeds the judge one thing the API server stored.
type step func(j *Judge)

func node(rv uint64, held bool, target string) step {
	return func(j *Judge) {
		j.Node(rv, fe1, NodeSeen{Kind: "Frontend", UID: "u1", Held: held, Target: target, Waiting: "waiting for acme-be"})
	}
}

// released is node with its released-target, as object uid.
func released(rv uint64, uid string, held bool, target, releasedTarget string) step {
	return func(j *Judge) {
		j.Node(rv, fe1, NodeSeen{Kind: "Frontend", UID: uid, Held: held, Target: target, Released: releasedTarget, Waiting: "waiting for acme-be"})
	}
}

func nodeGone(rv uint64, uid string) step {
	return func(j *Judge) { j.Node(rv, fe1, NodeSeen{Kind: "Frontend", UID: uid, Gone: true}) }
}

// auditNode is fe1 in audit mode at rv: held for target, or let go on it
// at releasedAt (its released-target is its target).
func auditNode(rv uint64, held bool, target string, releasedAt time.Time) step {
	released := target
	if held {
		released = ""
	}
	return func(j *Judge) {
		j.Node(rv, fe1, NodeSeen{Kind: "Frontend", UID: "u1", Held: held, Audit: true, Target: target, Released: released, ReleasedAt: releasedAt, Waiting: "would hold acme-fe1: waiting for acme-be"})
	}
}

func pod(rv uint64, name, target string, fromSet bool) step {
	return func(j *Judge) {
		j.PodCreated(rv, PodSeen{Node: fe1, Name: name, Target: target, FromSet: fromSet, Created: at(0)})
	}
}

func podGone(rv uint64, name string) step { return func(j *Judge) { j.PodDeleted(rv, fe1, name) } }

func set(rv uint64, target string) step {
	return func(j *Judge) { j.Set(rv, SetSeen{Node: fe1, Name: "acme-fe1", Target: target}) }
}

// rolling is the StatefulSet at rv, its template on target, its status's
// current and update revisions as given.
func rolling(rv uint64, target, current, update string) step {
	return func(j *Judge) {
		j.Set(rv, SetSeen{Node: fe1, Name: "acme-fe1", Target: target, Current: current, Update: update})
	}
}

// templateWritten is the StatefulSet at rv with its template on target and
// the status its controller wrote before: the revisions are an earlier
// template's (observedGeneration behind).
func templateWritten(rv uint64, target, current, update string) step {
	return func(j *Judge) {
		j.Set(rv, SetSeen{Node: fe1, Name: "acme-fe1", Target: target, Current: current, Update: update, Unobserved: true})
	}
}

// podAt is pod name made by the StatefulSet from revision.
func podAt(rv uint64, name, target, revision string) step {
	return func(j *Judge) {
		j.PodCreated(rv, PodSeen{Node: fe1, Name: name, Target: target, FromSet: true, Set: "acme-fe1", Revision: revision, Created: at(0)})
	}
}

func at(s int) time.Time { return time.Date(2026, 11, 28, 10, 0, s, 0, time.UTC) }

func everything(NodeKey) uint64 { return math.MaxUint64 }

func TestTheJudge(t *testing.T) {
	for name, tc := range map[string]struct {
		steps []step
		want  []string // kinds found, in order
	}{
		"a rollout whose pods come after the release keeps the order": {
			steps: []step{node(10, false, "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				node(20, true, "v2"), node(30, false, "v2"), set(31, "v2"), podGone(32, "acme-fe1-0"), pod(33, "acme-fe1-0", "v2", true)},
		},
		"a StatefulSet rolling a gated node to its new target is a violation": {
			steps: []step{node(10, false, "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				node(20, true, "v2"), set(21, "v2"), podGone(22, "acme-fe1-0"), pod(23, "acme-fe1-0", "v2", true), node(30, false, "v2")},
			want: []string{KindRolledWhileGated},
		},
		"a pod made by hand for the new target while the node is gated is a violation": {
			steps: []step{node(10, false, "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				node(20, true, "v2"), pod(21, "by-hand", "v2", false)},
			want: []string{KindPodWhileGated},
		},
		"a pod lost mid-roll just before the gate and made up just after at the roll's current revision is no violation": {
			steps: []step{node(10, false, "v1"), rolling(11, "v1", "r1", "r1"), podAt(12, "acme-fe1-0", "v1", "r1"), podAt(13, "acme-fe1-1", "v1", "r1"),
				node(20, false, "v2"), rolling(21, "v2", "r1", "r2"), podGone(22, "acme-fe1-1"), podAt(23, "acme-fe1-1", "v2", "r2"),
				podGone(24, "acme-fe1-0"), node(25, true, "v3"), podAt(26, "acme-fe1-0", "v1", "r1")},
		},
		"mid-roll, a pod made at the update revision of a template rolled while gated is a violation": {
			steps: []step{node(10, false, "v1"), rolling(11, "v1", "r1", "r1"), podAt(12, "acme-fe1-0", "v1", "r1"), podAt(13, "acme-fe1-1", "v1", "r1"),
				node(20, false, "v2"), rolling(21, "v2", "r1", "r2"), podGone(22, "acme-fe1-1"), podAt(23, "acme-fe1-1", "v2", "r2"),
				node(25, true, "v3"), rolling(26, "v3", "r1", "r3"), podGone(27, "acme-fe1-1"), podAt(28, "acme-fe1-1", "v3", "r3")},
			want: []string{KindRolledWhileGated},
		},
		"a StatefulSet made for a gated node, its current revision its only one, rolls it out of order": {
			steps: []step{node(10, true, "v1"), rolling(11, "v1", "r1", "r1"), podAt(12, "acme-fe1-0", "v1", "r1")},
			want:  []string{KindRolledWhileGated},
		},
		"a StatefulSet making up a lost pod of what the node ran is no violation": {
			steps: []step{node(10, false, "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				node(20, true, "v2"), podGone(21, "acme-fe1-0"), pod(22, "acme-fe1-0", "v1", true)},
		},
		"pods of the template a released rollout had when the next gate came are no violation": {
			steps: []step{node(10, false, "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				node(20, true, "v2"), node(25, false, "v2"), set(26, "v2"),
				node(30, true, "v3"), podGone(31, "acme-fe1-0"), pod(32, "acme-fe1-0", "v2", true)},
		},
		"a pod of a third target made while gated is a violation": {
			steps: []step{node(10, false, "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				node(20, true, "v2"), pod(21, "acme-fe1-1", "v9", true)},
			want: []string{KindRolledWhileGated},
		},
		"a new node's first pod made before its first release is a violation": {
			steps: []step{node(10, true, "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true)},
			want:  []string{KindRolledWhileGated},
		},
		"a pod stored after the release, in the same second, keeps the order": {
			steps: []step{node(10, true, "v1"), node(11, false, "v1"), set(12, "v1"), pod(13, "acme-fe1-0", "v1", true)},
		},
		"a pod that existed before the auditor's view is never judged": {
			steps: []step{node(10, true, "v2"), pod(0, "acme-fe1-0", "v2", true)},
		},
		"a node taken down and brought back holds anew": {
			steps: []step{node(10, false, "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				node(20, true, "v2"), node(30, false, "v2"), set(31, "v2"), podGone(32, "acme-fe1-0"), pod(33, "acme-fe1-0", "v2", true),
				node(40, true, "v3"), pod(41, "acme-fe1-1", "v3", true)},
			want: []string{KindRolledWhileGated},
		},
		"a target rolled while gated, then reverted under the same gate, is a violation: the gate is one hold whatever its target": {
			steps: []step{released(10, "u1", false, "v1", "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				released(20, "u1", true, "v2", "v1"), set(21, "v2"), released(22, "u1", true, "v1", "v1"),
				podGone(23, "acme-fe1-0"), pod(24, "acme-fe1-0", "v2", true),
				set(25, "v1"), podGone(26, "acme-fe1-0"), pod(27, "acme-fe1-0", "v1", true), released(30, "u1", false, "v1", "v1")},
			want: []string{KindRolledWhileGated},
		},
		"a target released before the gate, carried out after the sequencer wrote its condition, keeps the order": {
			steps: []step{released(10, "u1", false, "v1", "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				released(15, "u1", false, "v2", "v2"), released(20, "u1", true, "v3", "v2"), released(21, "u1", true, "v3", "v2"),
				set(23, "v2"), podGone(24, "acme-fe1-0"), pod(25, "acme-fe1-0", "v2", true)},
		},
		"a node deleted and made again, provisioned while gated beside its old pod still terminating, is a violation": {
			steps: []step{released(10, "u1", false, "v1", "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				func(j *Judge) { // between two settles: the deletion, its StatefulSet collected, the node made again
					nodeGone(40, "u1")(j)
					j.Set(41, SetSeen{Node: fe1, Name: "acme-fe1", Target: "v1", Gone: true})
					released(52, "u2", true, "v1", "")(j)
				},
				podGone(55, "acme-fe1-0"), set(56, "v1"), pod(57, "acme-fe1-0", "v1", true)},
			want: []string{KindRolledWhileGated},
		},
		"a node made again before its old StatefulSet is collected, provisioned while gated, is a violation": {
			steps: []step{released(10, "u1", false, "v1", "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				func(j *Judge) { nodeGone(40, "u1")(j); released(52, "u2", true, "v1", "")(j) },
				func(j *Judge) { j.Set(53, SetSeen{Node: fe1, Name: "acme-fe1", Target: "v1", Gone: true}) },
				podGone(55, "acme-fe1-0"), set(56, "v1"), pod(57, "acme-fe1-0", "v1", true)},
			want: []string{KindRolledWhileGated},
		},
		"a pod seen first after a broken watch, once the node was made again, counts as run from when it was seen": {
			steps: []step{released(10, "u1", false, "v1", "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				func(j *Judge) { nodeGone(40, "u1")(j); released(52, "u2", true, "v1", "")(j) },
				func(j *Judge) { j.Set(53, SetSeen{Node: fe1, Name: "acme-fe1", Target: "v1", Gone: true}) },
				released(54, "u2", false, "v1", "v1"), podGone(55, "acme-fe1-0"), set(56, "v1"),
				pod(57, "acme-fe1-0", "v1", true), pod(58, "acme-fe1-1", "v1", true),
				func(j *Judge) {
					j.Blind(streamPods, 60, 65)
					podGone(65, "acme-fe1-0")(j)
					j.PodMoved(65, PodSeen{Node: fe1, Name: "acme-fe1-0", Target: "v1", FromSet: true})
				},
				released(80, "u2", false, "v2", "v2"), set(81, "v2"), podGone(82, "acme-fe1-1"), pod(83, "acme-fe1-1", "v2", true),
				released(90, "u2", true, "v3", "v2"), podGone(95, "acme-fe1-0"), pod(96, "acme-fe1-0", "v1", true)},
		},
		"in audit, a node whose new target starts while the plan holds it would have been held": {
			steps: []step{auditNode(10, false, "v1", at(0)), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				auditNode(20, true, "v2", at(0)), set(21, "v2"), podGone(22, "acme-fe1-0"), pod(23, "acme-fe1-0", "v2", true),
				pod(24, "acme-fe1-1", "v2", true), auditNode(30, false, "v2", at(12))},
			want: []string{KindWouldHaveHeld},
		},
		"in audit, a node whose new target starts after the plan lets it go would not have been held": {
			steps: []step{auditNode(10, false, "v1", at(0)), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				auditNode(20, true, "v2", at(0)), auditNode(30, false, "v2", at(5)), set(31, "v2"), pod(32, "acme-fe1-1", "v2", true)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			j := NewJudge()
			var got []string
			for _, s := range tc.steps {
				s(j)
				for _, f := range j.Settle(everything) {
					got = append(got, f.Kind)
				}
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestATargetStartedWithinTheSequencersReactionTimeWouldNotHaveBeenHeld(t *testing.T) {
	j := NewJudge()
	j.Grace = 2 * time.Second
	for _, s := range []step{auditNode(10, false, "v1", at(0)), set(11, "v1"), auditNode(20, true, "v2", at(0)), pod(21, "acme-fe1-1", "v2", true),
		auditNode(30, false, "v2", at(1))} {
		s(j)
	}
	assert.Empty(t, j.Settle(everything), "a start 1s before the plan let it go is within a 2s grace")
	assert.Empty(t, j.open)
}

func TestAJudgementWaitsUntilTheNodeIsKnownThroughThePod(t *testing.T) {
	j := NewJudge()
	node(10, true, "v1")(j)
	pod(13, "acme-fe1-0", "v1", true)(j)
	known := uint64(12) // the node's watch has not delivered revision 13 yet
	upTo := func(NodeKey) uint64 { return known }
	assert.Empty(t, j.Settle(upTo), "judged before the node is known through the pod's revision")
	assert.Equal(t, map[NodeKey]uint64{fe1: 13}, j.Waiting(upTo))
	node(11, false, "v1")(j) // the release, stored before the pod, delivered late
	known = 20
	assert.Empty(t, j.Settle(upTo))
	assert.Zero(t, j.Pending())
}

func TestAViolationNamesWhatStartedBeforeWhat(t *testing.T) {
	j := NewJudge()
	for _, s := range []step{node(10, false, "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true), node(20, true, "v2"), pod(21, "acme-fe1-1", "v2", true)} {
		s(j)
	}
	found := j.Settle(everything)
	require.Len(t, found, 1)
	f := found[0]
	assert.Equal(t, "acme-fe1-1", f.Pod)
	assert.Equal(t, "v2", f.Target)
	assert.Equal(t, []string{"v1"}, f.Ran)
	assert.Equal(t, uint64(20), f.HeldAt)
	assert.Equal(t, uint64(21), f.CreatedAt)
	assert.Equal(t, "waiting for acme-be", f.Waiting)
}

func TestAWouldHaveHeldSaysHowLongEnforcingWouldHaveHeldIt(t *testing.T) {
	j := NewJudge()
	for _, s := range []step{auditNode(10, false, "v1", at(0)), set(11, "v1"), auditNode(20, true, "v2", at(0)), pod(21, "acme-fe1-1", "v2", true)} {
		s(j)
	}
	assert.Empty(t, j.Settle(everything), "reported before the plan let the node go")
	j.Node(25, fe1, NodeSeen{Kind: "Frontend", UID: "u1", Held: true, Audit: true, Target: "v2", Waiting: "would hold acme-fe1: waiting for acme-fe2 (Frontend) to be Ready"})
	auditNode(30, false, "v2", at(12))(j)
	found := j.Settle(everything)
	require.Len(t, found, 1)
	assert.Equal(t, 12*time.Second, found[0].HeldFor)
	assert.Equal(t, at(12), found[0].ReleasedAt)
	assert.Equal(t, "would hold acme-fe1: waiting for acme-fe2 (Frontend) to be Ready", found[0].Waiting, "what it waited for last")
}

// fe1's v2 started ahead of the plan in audit; its hold ends in one of the
// ways a hold ends. Only a release of v2 dates the end: the plan's, or a
// switch to enforce that adopts fe1 (the operator already rolls v2) and
// records one — the would-have-held then ends at the switch. Every other
// ending leaves an earlier release's date on the node, before the pod, or
// is no release (a node deleted, whatever its record says), and is
// reported with no end.
func TestAWouldHaveHeldEndsAtAReleaseOfItsTargetOrWithNoEnd(t *testing.T) {
	for name, c := range map[string]struct {
		ending   NodeSeen
		released time.Time
	}{
		"the node taken down (up: false) is reported with no end": {
			ending: NodeSeen{Kind: "Frontend", UID: "u1", Audit: true, Target: "v2", Released: "v1", ReleasedAt: at(0)},
		},
		"the node deleted is reported with no end": {
			ending: NodeSeen{Kind: "Frontend", UID: "u1", Audit: true, Gone: true, Target: "v2", Released: "v2", ReleasedAt: at(0)},
		},
		"its target changed again is reported with no end": {
			ending: NodeSeen{Kind: "Frontend", UID: "u1", Audit: true, Held: true, Target: "v3", Released: "", ReleasedAt: at(0)},
		},
		"a switch to enforce that gates the node is reported with no end": {
			ending: NodeSeen{Kind: "Frontend", UID: "u1", Held: true, Target: "v2", Released: "v1", ReleasedAt: at(0)},
		},
		"a switch to enforce that adopts the node ends it at the adoption": {
			ending:   NodeSeen{Kind: "Frontend", UID: "u1", Target: "v2", Released: "v2", ReleasedAt: at(9)},
			released: at(9),
		},
	} {
		t.Run(name, func(t *testing.T) {
			j := NewJudge()
			j.Grace = 2 * time.Second
			for _, s := range []step{auditNode(10, false, "v1", at(0)), set(11, "v1"), auditNode(20, true, "v2", at(0)), pod(21, "acme-fe1-1", "v2", true)} {
				s(j)
			}
			assert.Empty(t, j.Settle(everything))
			j.Node(30, fe1, c.ending)
			found := j.Settle(everything)
			require.Len(t, found, 1, "the would-have-held is reported")
			assert.Equal(t, "v2", found[0].Target)
			assert.Equal(t, c.released, found[0].ReleasedAt)
			if c.released.IsZero() {
				assert.Contains(t, Describe(found[0]), "with no end the plan recorded")
			} else {
				assert.Equal(t, c.released.Sub(at(0)), found[0].HeldFor)
			}
			assert.Empty(t, j.open)
		})
	}
}

// fe1's v2 started ahead of the plan in audit and was reported when
// on-call took fe1 down; brought back up on v2, which the plan still holds,
// its pods start ahead of the plan again: a second would-have-held, by the
// live judge and by one that starts (a restart) while it is under way.
func TestANodeBroughtBackUpOnATargetThePlanStillHoldsIsAWouldHaveHeldAgain(t *testing.T) {
	j := NewJudge()
	j.Grace = 2 * time.Second
	for _, s := range []step{auditNode(10, false, "v1", at(0)), set(11, "v1"), auditNode(20, true, "v2", at(0)), pod(21, "acme-fe1-1", "v2", true)} {
		s(j)
	}
	assert.Empty(t, j.Settle(everything))
	j.Node(30, fe1, NodeSeen{Kind: "Frontend", UID: "u1", Audit: true, Target: "v2", Released: "v1", ReleasedAt: at(0)}) // up: false
	podGone(31, "acme-fe1-1")(j)
	require.Len(t, j.Settle(everything), 1, "the first hold, ended with no end")
	auditNode(40, true, "v2", at(0))(j) // up again, held for v2
	pod(41, "acme-fe1-1", "v2", true)(j)
	assert.Empty(t, j.Settle(everything))
	auditNode(50, false, "v2", at(12))(j)
	found := j.Settle(everything)
	require.Len(t, found, 1, "the second hold, reported as the plan lets v2 go")
	assert.Equal(t, uint64(40), found[0].HeldAt)
	assert.Equal(t, 12*time.Second, found[0].HeldFor)

	restarted := NewJudge()
	restarted.Grace = 2 * time.Second
	auditNode(45, true, "v2", at(0))(restarted)
	pod(0, "acme-fe1-1", "v2", true)(restarted)
	restarted.FoundUnderWay()
	auditNode(50, false, "v2", at(12))(restarted)
	found = restarted.Settle(everything)
	require.Len(t, found, 1, "found under way in the first lists")
	assert.Equal(t, 12*time.Second, found[0].HeldFor)
}

// Two targets of fe1 start while the plan holds each, their pods judged in
// one pass (their node's watch was behind both): the first hold is
// reported, ended by the second, not replaced by it.
func TestTwoWouldHaveHeldsOfANodeJudgedInOnePassAreBothReported(t *testing.T) {
	j := NewJudge()
	j.Grace = 2 * time.Second
	for _, s := range []step{auditNode(10, false, "v1", at(0)), set(11, "v1"), auditNode(20, true, "v2", at(0)), pod(21, "acme-fe1-1", "v2", true),
		auditNode(30, true, "v3", at(0)), pod(31, "acme-fe1-2", "v3", true)} {
		s(j)
	}
	found := j.Settle(everything)
	require.Len(t, found, 1, "v2's hold, ended by v3's")
	assert.Equal(t, "v2", found[0].Target)
	auditNode(40, false, "v3", at(12))(j)
	found = j.Settle(everything)
	require.Len(t, found, 1, "v3's hold, ended by the plan letting v3 go")
	assert.Equal(t, "v3", found[0].Target)
	assert.Equal(t, 12*time.Second, found[0].HeldFor)
}

// The auditor starts (a restart, another replica leading) while fe1's
// target v2, started ahead of the plan in audit, is still held by it: the
// first lists show fe1 held for v2 and its pod of v2. The would-have-held
// is opened from them, and reported when the plan lets v2 go; a pod of
// what fe1 ran before opens none.
func TestAWouldHaveHeldUnderWayWhenTheAuditorStartsIsReported(t *testing.T) {
	for name, c := range map[string]struct {
		podTarget     string
		releasedAfter bool
		reported      bool
	}{
		"a pod of the target the plan holds": {podTarget: "v2", reported: true},
		"a pod of what the node ran before":  {podTarget: "v1", reported: false},
		"a pod of the held target made before the node's last release (left from before a revert)": {podTarget: "v2", releasedAfter: true, reported: false},
	} {
		t.Run(name, func(t *testing.T) {
			j := NewJudge()
			j.Grace = 2 * time.Second
			lastRelease := at(0) // the pod, made at(0), is not before its second
			if c.releasedAfter {
				lastRelease = at(3)
			}
			auditNode(50, true, "v2", lastRelease)(j)
			pod(0, "acme-fe1-0", c.podTarget, true)(j) // listed: made before the auditor's view
			j.FoundUnderWay()
			assert.Empty(t, j.Settle(everything), "reported before the plan let the node go")
			auditNode(60, false, "v2", at(12))(j)
			found := j.Settle(everything)
			if !c.reported {
				assert.Empty(t, found)
				return
			}
			require.Len(t, found, 1)
			assert.Equal(t, KindWouldHaveHeld, found[0].Kind)
			assert.Equal(t, "acme-fe1-0", found[0].Pod)
			assert.Equal(t, 12*time.Second, found[0].HeldFor)
		})
	}
}

// Of the pods of the held target the first lists show, the one made first
// dates the would-have-held: a StatefulSet rolls from its last ordinal
// down, and the lists come in name order.
func TestAWouldHaveHeldFoundUnderWayIsDatedByItsEarliestPod(t *testing.T) {
	j := NewJudge()
	j.Grace = 2 * time.Second
	auditNode(50, true, "v2", time.Time{})(j)
	for i, started := range []time.Time{at(5), at(0)} {
		j.PodCreated(0, PodSeen{Node: fe1, Name: "acme-fe1-" + strconv.Itoa(i), Target: "v2", FromSet: true, Created: started})
	}
	j.FoundUnderWay()
	auditNode(60, false, "v2", at(12))(j)
	found := j.Settle(everything)
	require.Len(t, found, 1)
	assert.Equal(t, "acme-fe1-1", found[0].Pod)
	assert.Equal(t, 12*time.Second, found[0].HeldFor)
}

// A watch breaks while fe1's would-have-held is open, and the sequencer
// rewrites fe1 (its condition) after the list that mends it: the judge
// counts a hold from there, but fe1 is the same object, held for the same
// target, with the same release recorded — no release came between. The
// hold ends when the plan lets v2 go, within the grace: nothing reported.
func TestAWouldHaveHeldDoesNotEndAtABrokenWatch(t *testing.T) {
	j := NewJudge()
	j.Grace = 5 * time.Second
	for _, s := range []step{auditNode(10, false, "v1", at(0)), set(11, "v1"), auditNode(20, true, "v2", at(0)), pod(21, "acme-fe1-1", "v2", true)} {
		s(j)
	}
	assert.Empty(t, j.Settle(everything))
	j.Blind("pods", 25, 28)
	auditNode(30, true, "v2", at(0))(j)
	assert.Empty(t, j.Settle(everything), "still held: no end")
	auditNode(40, false, "v2", at(2))(j)
	assert.Empty(t, j.Settle(everything), "let go 2 s after its pod started, within the grace")
	assert.Empty(t, j.open)
}

// fe1 held in audit for v2 from revision 20; its pod of v2 started ahead
// (21) and was deleted (22); a broken watch (25–28) makes the judge count a
// hold from the node's next version (30), the same hold by every field,
// and a second pod of v2 (31) is judged a would-have-held of that hold in
// the same pass as the first. One hold, one report: the first pod's, when
// the plan lets v2 go.
func TestASecondWouldHaveHeldOfAHoldThatGoesOnIsNotReportedApart(t *testing.T) {
	j := NewJudge()
	j.Grace = 5 * time.Second
	for _, s := range []step{auditNode(10, false, "v1", at(0)), set(11, "v1"), auditNode(20, true, "v2", at(0)), pod(21, "acme-fe1-1", "v2", true),
		podGone(22, "acme-fe1-1"), func(j *Judge) { j.Blind("pods", 25, 28) }, auditNode(30, true, "v2", at(0)), pod(31, "acme-fe1-2", "v2", true)} {
		s(j)
	}
	assert.Empty(t, j.Settle(everything), "still held: no end")
	require.Contains(t, j.open, fe1)
	assert.Equal(t, "acme-fe1-1", j.open[fe1].Pod, "the hold's first pod stays the finding")
	auditNode(40, false, "v2", at(12))(j)
	found := j.Settle(everything)
	require.Len(t, found, 1, "one hold, one report")
	assert.Equal(t, "acme-fe1-1", found[0].Pod)
	assert.Equal(t, at(12), found[0].ReleasedAt)
	assert.Equal(t, 12*time.Second, found[0].HeldFor)
}

func TestTheJudgeForgetsWhatNoJudgementNeeds(t *testing.T) {
	j := NewJudge()
	for i := uint64(0); i < 100; i++ {
		base := 100 + i*10
		node(base, true, "v"+string(rune('a'+i%26)))(j)
		node(base+1, false, "v"+string(rune('a'+i%26)))(j)
		podGone(base+2, "acme-fe1-0")(j)
		pod(base+3, "acme-fe1-0", "v"+string(rune('a'+i%26)), true)(j)
		set(base+4, "v"+string(rune('a'+i%26)))(j)
		assert.Empty(t, j.Settle(everything))
	}
	assert.LessOrEqual(t, len(j.nodes[fe1].revs), 2)
	assert.LessOrEqual(t, len(j.pods[fe1]), 2)
	assert.LessOrEqual(t, len(j.sets[fe1]["acme-fe1"]), 2)
	j.Node(2000, fe1, NodeSeen{UID: "u1", Gone: true})
	j.Settle(everything)
	assert.Empty(t, j.nodes, "a node gone is forgotten")
	assert.True(t, j.tombs[fe1], "while its pod is there, a node of its name would be another")
	podGone(2001, "acme-fe1-0")(j)
	j.Set(2002, SetSeen{Node: fe1, Name: "acme-fe1", Gone: true})
	j.Settle(everything)
	assert.Empty(t, j.pods, "its pods are forgotten once deleted")
	assert.Empty(t, j.sets, "its StatefulSets are forgotten once deleted")
	assert.Empty(t, j.tombs, "and so is its tomb")
}

func TestAPodCreatedWhereABrokenWatchMayHaveHiddenTheReleaseIsNotJudged(t *testing.T) {
	j := NewJudge()
	node(15, true, "v2")(j)
	// The watch broke after revision 15; the release at 20 was never
	// delivered, the relist shows the node as of 22.
	j.Blind("Frontend", 15, 22)
	pod(21, "acme-fe1-0", "v2", true)(j)
	assert.Empty(t, j.Settle(everything))
	assert.Zero(t, j.Pending())
	assert.Equal(t, uint64(1), j.Blinded, "counted as not judged")
	// Past the span, the relist's view counts: gated at 25 for v3, a pod
	// made for v3 at 30 is judged.
	node(25, true, "v3")(j)
	pod(30, "acme-fe1-1", "v3", true)(j)
	require.Len(t, j.Settle(everything), 1, "past the blind span, judged")
	assert.Equal(t, uint64(1), j.Blinded)
}

func TestATargetReleasedBeforeTheGateCountsAsRun(t *testing.T) {
	j := NewJudge()
	j.Node(10, fe1, NodeSeen{Kind: "Frontend", UID: "u1", Target: "v1", Released: "v1"})
	set(11, "v1")(j)
	j.Node(20, fe1, NodeSeen{Kind: "Frontend", UID: "u1", Target: "v2", Released: "v2"}) // released v2
	j.Node(22, fe1, NodeSeen{Kind: "Frontend", UID: "u1", Held: true, Target: "v3", Released: "v2"})
	set(23, "v2") // the operator carries out v2 from a cache that has not seen the gate for v3
	pod(25, "acme-fe1-0", "v2", true)(j)
	assert.Empty(t, j.Settle(everything), "v2 was released in order")
	pod(26, "acme-fe1-1", "v3", true)(j)
	require.Len(t, j.Settle(everything), 1, "v3 was not")
}

func TestAPodThatArrivesLateIsJudgedOnTheNodeAsItWasThen(t *testing.T) {
	j := NewJudge()
	node(10, false, "v1")(j)
	set(11, "v1")(j)
	node(15, true, "v2")(j)
	j.PodsThrough = 14 // the pods' watch lags: the pod of revision 17 is still to come
	node(20, false, "v2")(j)
	assert.Empty(t, j.Settle(everything))
	pod(17, "acme-fe1-0", "v2", true)(j)
	j.PodsThrough = 17
	found := j.Settle(everything)
	require.Len(t, found, 1, "made while gated (15–20), judged though the node's versions moved on")
	assert.Equal(t, uint64(15), found[0].HeldAt)
}

func TestAHoldSeenOnBothSidesOfABlindSpanCountsFromAfterIt(t *testing.T) {
	j := NewJudge()
	node(10, false, "v1")(j)
	set(11, "v1")(j)
	node(12, true, "v2")(j)
	// The watch of Frontends broke after 12. Unseen: fe1 released for v2
	// (15), rolled (16, 18), reverted to v1 and gated (20), changed to v2
	// again and gated (25). The list shows it as of 25: held for v2, as
	// at 12.
	j.Blind("Frontend", 12, 25)
	set(16, "v2")(j)
	podGone(17, "acme-fe1-0")(j)
	pod(18, "acme-fe1-0", "v2", true)(j)
	node(25, true, "v2")(j)
	assert.Empty(t, j.Settle(everything), "the pod of 18 is in the blind span")
	// A crash: the StatefulSet makes up the lost pod of v2, which the node
	// ran before the hold seen at 25.
	podGone(30, "acme-fe1-0")(j)
	pod(31, "acme-fe1-0", "v2", true)(j)
	assert.Empty(t, j.Settle(everything), "what the node ran when the hold seen after the span began")
}

func wouldHeldPod(rv uint64, name string) step {
	return func(j *Judge) {
		j.PodCreated(rv, PodSeen{Node: fe1, Name: name, Target: "v1", FromSet: true, Created: at(0),
			WouldHold: "recovering: new pods held scheduling-gated; waiting for acme-be (Backend) to be Ready"})
	}
}

func letGo(name string, s int) step { return func(j *Judge) { j.PodLetGo(fe1, name, "", at(s)) } }

func TestARecoveryEnforcingWouldHaveHeld(t *testing.T) {
	released := at(-60)
	for name, tc := range map[string]struct {
		steps   []step
		want    bool
		heldFor time.Duration
	}{
		"a new pod the webhook would have gated, let go 8 s later, is a would-have-held": {
			steps: []step{auditNode(10, false, "v1", released), podGone(20, "acme-fe1-0"), wouldHeldPod(21, "acme-fe1-0"), letGo("acme-fe1-0", 8)},
			want:  true, heldFor: 8 * time.Second,
		},
		"one let go within the grace is not": {
			steps: []step{auditNode(10, false, "v1", released), podGone(20, "acme-fe1-0"), wouldHeldPod(21, "acme-fe1-0"), letGo("acme-fe1-0", 2)},
		},
		"one deleted before the plan let it go is, for as long as it lasted": {
			steps: []step{auditNode(10, false, "v1", released), podGone(20, "acme-fe1-0"), wouldHeldPod(21, "acme-fe1-0"), podGone(30, "acme-fe1-0")},
			want:  true,
		},
		"one whose namespace left audit before the plan let it go is, for as long as it lasted": {
			steps: []step{auditNode(10, false, "v1", at(-60)), podGone(20, "acme-fe1-0"), wouldHeldPod(21, "acme-fe1-0"), node(30, false, "v1")},
			want:  true,
		},
		"a new pod the webhook would have let start is not": {
			steps: []step{auditNode(10, false, "v1", released), podGone(20, "acme-fe1-0"), pod(21, "acme-fe1-0", "v1", true), podGone(30, "acme-fe1-0")},
		},
		"in enforce mode a pod noted as would-hold is no recovery finding": {
			steps: []step{node(10, false, "v1"), podGone(20, "acme-fe1-0"), wouldHeldPod(21, "acme-fe1-0"), letGo("acme-fe1-0", 8)},
		},
	} {
		t.Run(name, func(t *testing.T) {
			j := NewJudge()
			j.Grace = 5 * time.Second
			var found []Finding
			for _, s := range tc.steps {
				s(j)
				found = append(found, j.Settle(everything)...)
			}
			if !tc.want {
				assert.Empty(t, found)
				return
			}
			require.Len(t, found, 1)
			assert.Equal(t, KindWouldHaveHeld, found[0].Kind)
			assert.True(t, found[0].Recovery)
			assert.Equal(t, "acme-fe1-0", found[0].Pod)
			assert.Equal(t, tc.heldFor, found[0].HeldFor)
			assert.Contains(t, Describe(found[0]), "acme-fe1 recovered: its new pod acme-fe1-0")
			assert.Contains(t, Describe(found[0]), "waiting for acme-be (Backend) to be Ready")
		})
	}
}

func TestARecoveryIsReportedOncePerNodeWhileItsFirstPodIsHeld(t *testing.T) {
	j := NewJudge()
	auditNode(10, false, "v1", at(-60))(j)
	wouldHeldPod(21, "acme-fe1-0")(j)
	wouldHeldPod(22, "acme-fe1-1")(j)
	assert.Empty(t, j.Settle(everything), "open while the plan has not let the pod go")
	letGo("acme-fe1-0", 9)(j)
	letGo("acme-fe1-1", 9)(j)
	found := j.Settle(everything)
	require.Len(t, found, 1)
	assert.Equal(t, "acme-fe1-0", found[0].Pod)
	assert.Equal(t, 9*time.Second, found[0].HeldFor)
}

func TestARecoveryWhosePodIsMadeAgainIsReportedAlikeHoweverTheJudgementsFall(t *testing.T) {
	for name, gone := range map[string]func(j *Judge, settle func()){
		"judged between the deletion and the new pod": func(j *Judge, settle func()) { podGone(25, "acme-fe1-0")(j); settle() },
		"judged after both":                           func(j *Judge, _ func()) { podGone(25, "acme-fe1-0")(j) },
		"the deletion found by a list, dated by it": func(j *Judge, _ func()) {
			j.Blind(streamPods, 22, 25)
			podGone(25, "acme-fe1-0")(j) // deleted at 23, found gone by the list at 25
		},
	} {
		t.Run(name, func(t *testing.T) {
			j := NewJudge()
			j.Grace = 5 * time.Second
			var found []Finding
			settle := func() { found = append(found, j.Settle(everything)...) }
			auditNode(10, false, "v1", at(-60))(j)
			wouldHeldPod(21, "acme-fe1-0")(j)
			settle()
			gone(j, settle)
			j.PodCreated(26, PodSeen{Node: fe1, Name: "acme-fe1-0", UID: "second", Target: "v1", FromSet: true, Created: at(1), WouldHold: "waiting for acme-be"})
			settle()
			j.PodLetGo(fe1, "acme-fe1-0", "second", at(31))
			settle()
			require.Len(t, found, 2)
			assert.Zero(t, found[0].HeldFor, "the first pod's, for as long as it lasted")
			assert.Equal(t, uint64(26), found[1].CreatedAt)
			assert.Equal(t, 30*time.Second, found[1].HeldFor, "the second pod's, until the plan let it go")
		})
	}
}

// The switch to enforce gates fe1 where it stood in audit, on v2: the
// Express operator was free to roll v2 a moment before, and may still do it
// from a cache that has not seen the gate (the pod webhook creates what it
// makes held). That is not counted; a later target under the same gate is.
// A node brought up gated at a target it carried down is no such instant:
// down, the operator was not free to provision it.
func TestAPodOfTheTargetANodeCarriedUngatedUntilTheSwitchGatedItIsNotCounted(t *testing.T) {
	// at is fe1 at revision rv: up or down, gated or not, in audit or not.
	type version struct {
		rv                   uint64
		uid                  string
		live, held, audit    bool
		gated                bool // the gate on the version, where held is not (the mode read late)
		target, releasedHash string
	}
	at := func(v version) step {
		return func(j *Judge) {
			j.Node(v.rv, fe1, NodeSeen{Kind: "Frontend", UID: v.uid, Live: v.live, Held: v.held || v.gated, Gated: v.gated || v.held && !v.audit, Audit: v.audit,
				Target: v.target, Released: v.releasedHash, Key: "key-" + v.target, Waiting: "waiting for acme-be"})
		}
	}
	released := version{rv: 10, uid: "u1", live: true, target: "v1", releasedHash: "v1"}
	gatedWhereItStood := version{rv: 30, uid: "u1", live: true, held: true, target: "v2", releasedHash: "v1"}
	for name, c := range map[string]struct {
		before []step
		pod    string // the target of the pod the operator makes at 33
		counts bool
	}{
		"held by the plan in audit, then gated for the same target, is not counted": {
			before: []step{at(version{rv: 20, uid: "u1", live: true, held: true, audit: true, target: "v2", releasedHash: "v1"})},
			pod:    "v2",
		},
		"seen live and ungated in enforce before the switch's gate, for the same target, is not counted": {
			before: []step{at(version{rv: 20, uid: "u1", live: true, target: "v2", releasedHash: "v1"})},
			pod:    "v2",
		},
		"gated for a new target, the old one ungated before, is counted": {
			before: []step{at(version{rv: 20, uid: "u1", live: true, target: "v1", releasedHash: "v1"})},
			pod:    "v2", counts: true,
		},
		"gated before, read as audit (the namespace's mode read late), is counted": {
			before: []step{at(version{rv: 20, uid: "u1", live: true, audit: true, gated: true, target: "v2", releasedHash: "v1"})},
			pod:    "v2", counts: true,
		},
		"left unreleased on v1 by audit, then gated for v2, is counted for v2": {
			before: []step{at(version{rv: 20, uid: "u1", live: true, held: true, audit: true, target: "v1", releasedHash: "v0"})},
			pod:    "v2", counts: true,
		},
		"another object of the name before is counted": {
			before: []step{at(version{rv: 20, uid: "u0", live: true, target: "v2", releasedHash: "v1"})},
			pod:    "v2", counts: true,
		},
		"changed while down, then brought up gated (up is not in the target), is counted": {
			before: []step{
				at(version{rv: 20, uid: "u1", target: "v1", releasedHash: "v1"}),
				at(version{rv: 25, uid: "u1", target: "v2", releasedHash: "v1"}),
			},
			pod: "v2", counts: true,
		},
		"gated, taken down (its gate removed) and brought up gated again is counted": {
			before: []step{
				at(version{rv: 20, uid: "u1", live: true, held: true, target: "v2", releasedHash: "v1"}),
				at(version{rv: 25, uid: "u1", target: "v2", releasedHash: "v1"}),
			},
			pod: "v2", counts: true,
		},
		"a version before the gate that another watch's break may have hidden is counted": {
			before: []step{
				at(version{rv: 20, uid: "u1", live: true, target: "v2", releasedHash: "v1"}),
				func(j *Judge) { j.Blind("Frontend", 22, 28) },
			},
			pod: "v2", counts: true,
		},
		"a pod on the contract's fallback (no target-hash label) is counted: the pod webhook does not hold it so": {
			before: []step{at(version{rv: 20, uid: "u1", live: true, held: true, audit: true, target: "v2", releasedHash: "v1"})},
			pod:    "key-v2", counts: true,
		},
	} {
		t.Run(name, func(t *testing.T) {
			j := NewJudge()
			at(released)(j)
			set(11, "v1")(j)
			for _, s := range c.before {
				s(j)
			}
			at(gatedWhereItStood)(j)
			set(32, c.pod)(j) // the operator rolls from a cache that has not seen the gate
			pod(33, "acme-fe1-0", c.pod, true)(j)
			found := j.Settle(everything)
			if c.counts {
				require.Len(t, found, 1)
				assert.Equal(t, KindRolledWhileGated, found[0].Kind)
				return
			}
			assert.Empty(t, found)
			j.Node(40, fe1, NodeSeen{Kind: "Frontend", UID: "u1", Live: true, Held: true, Gated: true, Target: "v3", Released: "v1"})
			pod(41, "acme-fe1-1", "v3", true)(j)
			found = j.Settle(everything)
			require.Len(t, found, 1, "v3, a target changed under the gate, was never free to roll")
			assert.Equal(t, KindRolledWhileGated, found[0].Kind)
			assert.Equal(t, uint64(30), found[0].HeldAt)
		})
	}
}
