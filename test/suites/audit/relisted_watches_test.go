package audit

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
)

// The auditor's watches of Backends and Frontends break while 12 tenants
// roll a change, and when they come back each is told 410 Gone, as a
// kube-apiserver started again tells a watch of a revision its new watch
// cache has not: client-go lists again, without a word to the watch's error
// handler, and the list hands its nodes over in no order of revision while
// the pods' watch, never broken, has delivered their pods long since. The
// rollouts kept their order: the auditor sees the lists and counts no
// violation. (A judgement falling between two objects of such a list is
// stepped through in internal/audit's relist_test.go: here the list of a
// few dozen nodes is handed over faster than the auditor judges.)
func TestNodesListedAgainInNoOrderMidRolloutCountNoViolation(t *testing.T) {
	const size = 3
	namespaces := make([]string, 12)
	for i := range namespaces {
		namespaces[i] = namespace(t, expressoperator.Breakage{}, nil)
		tenants.Create(t, namespaces[i], size, v1, nil)
	}
	for _, ns := range namespaces {
		tenants.WaitSettled(t, ns, size, 2*time.Minute, nil)
	}
	judged(t)
	violations, relists := counted(t, auditmetrics.Violations), counted(t, auditmetrics.Relists)

	watches.Break()
	mended := false
	defer func() {
		if !mended {
			watches.Mend()
		}
	}()
	for _, ns := range namespaces {
		tenants.SetVersion(t, ns, v2, "fe1", "fe2", "be")
	}
	// fe1 and fe2 of every tenant released (their pods made and seen by
	// the pods' watch), while the nodes' watches see nothing.
	require.True(t, tenants.WaitFor(2*time.Minute, func() bool {
		for _, ns := range namespaces {
			if g := gated(t, ns, size); slices.Contains(g, "fe1") || slices.Contains(g, "fe2") {
				return false
			}
		}
		return true
	}), "every tenant's fe1 and fe2 released")
	watches.Mend()
	mended = true
	for _, ns := range namespaces {
		tenants.WaitSettled(t, ns, size, 2*time.Minute, nil)
	}
	judged(t)
	assert.Greater(t, counted(t, auditmetrics.Relists), relists, "the nodes' watches listed again")
	assert.Equal(t, violations, counted(t, auditmetrics.Violations), "no violation where the order held")
}
