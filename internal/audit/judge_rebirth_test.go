package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// The table row "a node made again before its old StatefulSet is
// collected, provisioned while gated, is a violation" feeds the deletion and
// the re-creation between two settles. The auditor settles every 200 ms;
// a node deleted and applied again by hand or by a chart is judged after a
// settle has forgotten the old node. If anything of the old node's arrives
// in between — its StatefulSet's status written, or a pod it makes up —
// the new node is born with no birth (bornAt 0) and the old node's
// StatefulSet and pods count as what the new one ran when gated.
func TestANodeMadeAgainIsJudgedAsANewNodeHoweverTheSettlesFall(t *testing.T) {
	for name, between := range map[string]step{
		"nothing of the old node's in between":         func(*Judge) {},
		"the old StatefulSet's status written between": set(45, "v1"),
		"the old StatefulSet making up a pod between":  func(j *Judge) { podGone(44, "acme-fe1-0")(j); pod(45, "acme-fe1-0", "v1", true)(j) },
	} {
		t.Run(name, func(t *testing.T) {
			steps := []step{released(10, "u1", false, "v1", "v1"), set(11, "v1"), pod(12, "acme-fe1-0", "v1", true),
				nodeGone(40, "u1"), // settled: the old node is forgotten
				between,
				released(52, "u2", true, "v1", ""),
				func(j *Judge) { j.Set(53, SetSeen{Node: fe1, Name: "acme-fe1", Target: "v1", Gone: true}) },
				podGone(55, "acme-fe1-0"), set(56, "v1"), pod(57, "acme-fe1-0", "v1", true)}
			assert.Equal(t, []string{KindRolledWhileGated}, run(steps), "the new fe1 provisioned while gated, as when the two land between two settles")
		})
	}
}

// operations.md: "a node deleted with --cascade=orphan and made again,
// whose StatefulSet the operator adopts, has its first pods judged as a new
// node's". Through the auditor's feed, with the auditor's own settles in
// between as they fall when a person deletes and applies again: the
// orphaned StatefulSet's status is written (a pod's readiness changed)
// after the settle that forgot the old fe1, and the new fe1, gated, is
// provisioned by the adopted StatefulSet — not counted. Without that status
// write, or without a settle between deletion and re-creation, it is.
func TestANodeDeletedWithCascadeOrphanAndMadeAgainHasItsFirstPodsJudgedAsANewNodesWhenTheOrphanIsWrittenMeanwhile(t *testing.T) {
	for name, tc := range map[string]struct{ settleBetween, statusWrite bool }{
		"no settle between deletion and re-creation": {false, true},
		"a settle between, no status write":          {true, false},
		"a settle between, then a status write":      {true, true},
	} {
		t.Run(name, func(t *testing.T) {
			a := handFedAuditor(v2alpha1.ModeEnforce)
			p1 := runs1(a, labelsOf["target-hash labels"])
			a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u1", 40, false, "1", "1"), true)
			if tc.settleBetween {
				assert.Empty(t, a.settleThrough(41))
			}
			if tc.statusWrite {
				orphan := setObj("s1", "45", "h1") // its owner reference removed; a status write
				a.onSet(orphan, false, false)
			}
			a.onNode(v2alpha1.KindFrontend, versionedNode("acme-fe1", "u2", 52, true, "1", ""), false)
			a.onSet(setObj("s1", "53", "h1"), false, false) // adopted
			gone := p1.DeepCopy()
			gone.ResourceVersion = "55"
			a.onPodDeleted(gone, a.podInformer)
			again := podObj("p2", "56", "h1")
			a.onPodAdded(again, false)
			assert.Len(t, a.settleThrough(60), 1, "the new fe1's first pod, made while it was gated")
		})
	}
}
