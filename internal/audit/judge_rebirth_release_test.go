package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// fe1 (u1) runs v1 and is deleted with --cascade=orphan; a settle forgets
// it (a tomb). It is applied again (u2) for v2, gated, and released for v2
// at 60; its StatefulSet, adopted, still runs v1 (the adoption changes no
// revision: sameMaking skips it). Before the operator rolls it, fe1 is
// changed to v3 and gated at 70. acme-fe1-0, evicted, is made up by the
// StatefulSet from its only revision, v1: what fe1's pods and template ran
// when the gate was added. Not fe1's first pod either — it was released.
func TestAPodMadeUpAfterTheReleaseOfANodeMadeAgainOverAnAdoptedStatefulSetIsNoViolation(t *testing.T) {
	steps := []step{released(10, "u1", false, "v1", "v1"), rolling(11, "v1", "r1", "r1"), podAt(12, "acme-fe1-0", "v1", "r1"),
		nodeGone(40, "u1"), // settled: forgotten, a tomb
		released(52, "u2", true, "v2", ""),
		rolling(53, "v1", "r1", "r1"), // adopted: a metadata write
		released(60, "u2", false, "v2", "v2"),
		released(70, "u2", true, "v3", "v2"),
		podGone(71, "acme-fe1-0"), podAt(72, "acme-fe1-0", "v1", "r1")}
	assert.Empty(t, run(steps), "a StatefulSet making up a lost pod of what the node ran at the gate")
}
