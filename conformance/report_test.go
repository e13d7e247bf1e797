package conformance

import (
	"bytes"
	"encoding/xml"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

func sampleReport() Report {
	r := newReport(Config{Namespace: "scratch", Implementation: Implementation{Project: "express-operator", Version: "7.2"}}, time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC))
	r.Mode = ModeWithSequencer
	r.add(ClauseResult{ID: "gates-hold", Section: "§1 Honour the rollout gates", Description: "holds", Result: Failed, Reason: "pod gates-hold-be-0 created at 03:00:01.000", Duration: "4.2s"})
	r.add(ClauseResult{ID: "up-false", Section: "§1 Honour the rollout gates", Description: "down", Result: Passed, Duration: "7s"})
	r.add(ClauseResult{ID: "failing-pods", Section: "§2", Description: "failing", Result: Skipped, Reason: "no failing version", Duration: "0s"})
	return r
}

func TestAReportCountsEachResultAndFailsWhenAClauseFailed(t *testing.T) {
	r := sampleReport()
	assert.Equal(t, Summary{Result: RunFailure, Passed: 1, Failed: 1, Skipped: 1}, r.Summary)
	assert.True(t, r.Failed())
	c, ok := r.Clause("up-false")
	require.True(t, ok)
	assert.Equal(t, Passed, c.Result)
	_, ok = r.Clause("no-such-clause")
	assert.False(t, ok)
}

func TestARunWithASkippedClauseAndNoFailureIsPartial(t *testing.T) {
	r := newReport(Config{}, time.Now())
	r.add(ClauseResult{ID: "up-false", Result: Passed})
	assert.Equal(t, RunSuccess, r.Summary.Result, "every clause passed")
	r.add(ClauseResult{ID: "failing-pods", Result: Skipped})
	assert.Equal(t, RunPartial, r.Summary.Result, "a clause skipped: not shown")
	assert.False(t, r.Failed())
	r.add(ClauseResult{ID: "gates-hold", Result: Failed})
	assert.Equal(t, RunFailure, r.Summary.Result)
}

func TestTheYAMLReportHasTheShapeOfGatewayAPIsConformanceReports(t *testing.T) {
	data, err := sampleReport().YAML()
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, yaml.Unmarshal(data, &back))
	assert.Equal(t, "ConformanceReport", back["kind"])
	assert.Equal(t, ContractVersion, back["contractVersion"])
	assert.Equal(t, map[string]any{"project": "express-operator", "version": "7.2"}, back["implementation"])
	assert.Len(t, back["clauses"], 3)
}

func TestTheJUnitReportHasATestCasePerClauseWithTheFailureEvidence(t *testing.T) {
	data, err := sampleReport().JUnit()
	require.NoError(t, err)
	var suites junitSuites
	require.NoError(t, xml.Unmarshal(data, &suites))
	require.Len(t, suites.Suites, 1)
	s := suites.Suites[0]
	assert.Equal(t, 3, s.Tests)
	assert.Equal(t, 1, s.Failures)
	assert.Equal(t, 1, s.Skipped)
	require.NotNil(t, s.Cases[0].Failure)
	assert.Equal(t, "pod gates-hold-be-0 created at 03:00:01.000", s.Cases[0].Failure.Text)
	assert.Nil(t, s.Cases[1].Failure)
	require.NotNil(t, s.Cases[2].Skipped)
	assert.Equal(t, "no failing version", s.Cases[2].Skipped.Message)
}

func TestTheTableSaysEachClausesResultAndTheEvidenceOfAFailure(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, sampleReport().Table(&b))
	out := b.String()
	assert.Contains(t, out, "gates-hold")
	assert.Contains(t, out, "FAILED")
	assert.Contains(t, out, "pod gates-hold-be-0 created at 03:00:01.000")
	assert.Contains(t, out, "1 passed, 1 failed, 1 skipped (with express-sequencer, contract v4)")
}

func TestAnUnknownClauseIsRefusedNamingTheClauses(t *testing.T) {
	_, err := selectClauses([]string{"gates-hold", "no-such"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `no clause "no-such"`)
	assert.Contains(t, err.Error(), "up-false")
	all, err := selectClauses(nil)
	require.NoError(t, err)
	assert.Len(t, all, len(Clauses()))
}

func TestTheKitsOwnHashChangesWithTheTargetAloneNotWithGatesDependenciesOrUp(t *testing.T) {
	p := &probe{cfg: Config{}.withDefaults(), ns: "n", name: "x-be"}
	u := p.newNode("v1")
	h := targetHash(u)
	addGate(u)
	setField(u, false, "up")
	setField(u, map[string]any{"upgradePrerequisites": []any{}}, "deploymentDependencies")
	assert.Equal(t, h, targetHash(u), "gates, up and the lists are not the target")
	setField(u, "changed", "conformanceProbe")
	assert.NotEqual(t, h, targetHash(u), "any other field is")
}
