package conformance

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/conformance"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
	"github.com/medallia/express-sequencer/test/framework/tenant"
)

// unacted is a field of the test CRDs no operator acts on: under
// spec.extensions, a subtree the API server keeps whatever it holds.
var unacted = controlplane.PreservedField + ".conformanceProbe"

// The whole kit against the test operator, which does the contract's part:
// every clause passes, the failing-pods clause on KWOK's crash-looping
// image (expressVersion "broken").
func TestTheKitPassesAgainstAnOperatorThatHonoursTheContract(t *testing.T) {
	start := time.Now()
	report := conformance.Run(t, conformance.Config{
		RESTConfig: harness.Config, Namespace: namespace(t, expressoperator.Breakage{}),
		FailingVersion: "broken", HoldWindow: 4 * time.Second, UnactedField: unacted,
		Implementation: conformance.Implementation{Project: "expressoperator (express-sequencer's test operator)"},
	})
	t.Logf("the whole kit took %s", time.Since(start).Round(time.Second))
	assert.Equal(t, conformance.ModeWithSequencer, report.Mode)
	assert.Equal(t, conformance.RunSuccess, report.Summary.Result)
	assert.Len(t, report.Clauses, len(conformance.Clauses()))
	for _, c := range report.Clauses {
		assert.Equal(t, conformance.Passed, c.Result, "%s: %s", c.ID, c.Reason)
	}
}

// The same where express-sequencer's webhooks leave the namespace alone:
// the kit stamps the target hash itself, every clause but the two that
// need the sequencer passes, and those are skipped saying why.
func TestTheKitRunsWithoutExpressSequencer(t *testing.T) {
	report := conformance.Run(t, conformance.Config{
		RESTConfig: harness.Config, Namespace: namespace(t, expressoperator.Breakage{}, withoutSequencer),
		FailingVersion: "broken", HoldWindow: 4 * time.Second, UnactedField: unacted,
	})
	assert.Equal(t, conformance.ModeWithoutSequencer, report.Mode)
	assert.Equal(t, conformance.RunPartial, report.Summary.Result, "two clauses skipped, none failed")
	for _, c := range report.Clauses {
		want := conformance.Passed
		if c.ID == "sequencer-release" || c.ID == "gate-only-hold" {
			want = conformance.Skipped
			assert.Contains(t, c.Reason, "needs express-sequencer")
		}
		assert.Equal(t, want, c.Result, "%s: %s", c.ID, c.Reason)
	}
}

// In a namespace express-sequencer audits, its webhook stamps the nodes and
// gates none: the report says so, the clauses that need no gate of the
// sequencer's run, and those that need it enforcing are skipped, saying how
// to run them.
func TestTheKitInAnAuditedNamespaceSkipsWhatNeedsEnforcing(t *testing.T) {
	ns := namespace(t, expressoperator.Breakage{})
	tenant.SetMode(t, harness.Client, ns, v2alpha1.ModeAudit)
	report := conformance.Run(t, conformance.Config{
		RESTConfig: harness.Config, Namespace: ns, HoldWindow: 4 * time.Second, UnactedField: unacted,
		Clauses: []string{"rolls-labelled", "gate-only-hold", "sequencer-release"},
	})
	assert.Equal(t, conformance.ModeSequencerAudits, report.Mode)
	for _, c := range report.Clauses {
		if c.ID == "rolls-labelled" {
			assert.Equal(t, conformance.Passed, c.Result, c.Reason)
			continue
		}
		assert.Equal(t, conformance.Skipped, c.Result, c.ID)
		assert.Contains(t, c.Reason, "audit mode", c.ID)
	}
}

// Each operator broken on purpose fails the clause it breaks, and the
// report names the clause and says what broke the rule.
func TestEachBrokenOperatorFailsTheClauseItBreaks(t *testing.T) {
	cases := []struct {
		name   string
		broken expressoperator.Breakage
		clause string
		reason string // what the failure says: the check that caught it
	}{
		{"an operator that ignores the gates rolls a gated node", expressoperator.Breakage{IgnoresGates: true}, "gates-hold", "which carried rollout gate"},
		{"an operator that ignores the gates but acts only once a node's spec has settled outwaits the hold window", expressoperator.Breakage{IgnoresGates: true, Debounce: 5 * time.Second}, "gates-hold", "more than three quarters of the hold window"},
		{"an operator that honours gates only on nodes it has provisioned provisions a node created gated", expressoperator.Breakage{ProvisionsGated: true}, "gates-hold", "its creation with a rollout gate"},
		{"an operator that honours gates only on nodes that run provisions again a gated node brought back up", expressoperator.Breakage{ReprovisionsGated: true}, "gates-hold", "the node brought back up"},
		{"an operator that honours a Frontend's gates only to provision it rolls a gated Frontend", expressoperator.Breakage{RollsGatedFrontends: true}, "gates-hold", "-gated, which carried rollout gate"},
		{"an operator that checks the gates for a version change but not for a revision change rolls a gated node", expressoperator.Breakage{RollsGatedRevisionChanges: true}, "gates-hold", "after a revision change (spec.deploymentRevision)"},
		{"an operator that forgets the hash label leaves pods off their target", expressoperator.Breakage{NoTargetHash: true}, "rolls-labelled", `target-hash=""`},
		{"an operator that forgets the hash label fails the sequencer's release at its first rollout", expressoperator.Breakage{NoTargetHash: true}, "sequencer-release", `target-hash=""`},
		{"an operator that relabels its running pods for a version change has old pods read as new", expressoperator.Breakage{RelabelsPods: true}, "rolls-labelled", "relabelled, not replaced"},
		{"an operator that rolls version changes only leaves a config-only change unrolled", expressoperator.Breakage{RollsOnVersionOnly: true}, "rolls-any-field", "a config-only change"},
		{"an operator that replaces the whole conditions list erases another writer's condition", expressoperator.Breakage{ReplacesConditions: true}, "conditions", "gone after a status write"},
		{"an operator that rewrites another writer's condition makes an old completion read as the current one's", expressoperator.Breakage{RewritesConditions: true}, "conditions", "observedGeneration 1 →"},
		{"an operator that writes the sequencer's PrerequisitesReady forges the record of a rollout it never released", expressoperator.Breakage{ForgesCompletion: true}, "conditions", "is written by field manager"},
		{"an operator that partitions its StatefulSet never lets it record a rollout", expressoperator.Breakage{Partition: true}, "statefulset", "rolls with partition"},
		{"an operator that names its StatefulSet otherwise keeps a decision from reading it by name", expressoperator.Breakage{NamesSetsOtherwise: true}, "statefulset", "is to be named after the node"},
		{"an operator that rebuilds the template from the spec on up: false records a change it was never let go for", expressoperator.Breakage{RebuildsWhenDown: true}, "up-false", "gated with a version change, was set up: false"},
		{"an operator that deletes the StatefulSet on up: false loses the record of what the node ran", expressoperator.Breakage{DeletesWhenDown: true}, "up-false", "deleted or replaced"},
		{"an operator that deletes the StatefulSet a while after the node went down loses the record of what it ran", expressoperator.Breakage{DeletesWhenDownLater: true}, "up-false", "was down: StatefulSet"},
		{"an operator that makes the StatefulSet again for a version change leaves no record of the node's rollout", expressoperator.Breakage{RecreatesSetOnChange: true}, "statefulset", "was made again for the version change"},
		{"an operator that partitions its StatefulSet never has its release recorded complete", expressoperator.Breakage{Partition: true}, "sequencer-release", "not recorded complete"},
		{"an operator that waits before its pods come back delays recovery", expressoperator.Breakage{RecreateDelay: 15 * time.Second}, "recreate-promptly", "held by scheduling gates"},
		{"an operator that deletes crash-looping pods hides the failure", expressoperator.Breakage{MasksFailures: true}, "failing-pods", "a failing pod hidden this way"},
		{"an operator that also waits for the node's own lists deadlocks with the sequencer where it breaks a circular wait", expressoperator.Breakage{OrdersByItsLists: true}, "gate-only-hold", "deadlocks with it"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			report, err := conformance.Check(context.Background(), conformance.Config{
				RESTConfig: harness.Config, Namespace: namespace(t, c.broken), Clauses: []string{c.clause},
				HoldWindow: 4 * time.Second, RolloutTimeout: 20 * time.Second, RecreateWithin: 10 * time.Second, UnactedField: unacted,
				FailingVersion: "broken",
			})
			require.NoError(t, err)
			require.True(t, report.Failed(), "the report fails")
			got, ok := report.Clause(c.clause)
			require.True(t, ok, "the report names clause %s", c.clause)
			assert.Equal(t, conformance.Failed, got.Result)
			assert.Contains(t, got.Reason, c.reason, "a failure says what broke the rule, as the clause's own check finds it")
			t.Logf("%s: %s", c.clause, got.Reason)
		})
	}
}
