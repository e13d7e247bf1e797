package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/audit"
	"github.com/medallia/express-sequencer/internal/golden"
)

func TestSinceTakesDaysAndDurations(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "36h": 36 * time.Hour, "90m": 90 * time.Minute} {
		got, err := parseSince(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for _, bad := range []string{"", "0d", "-1d", "week", "-3h", "7days"} {
		_, err := parseSince(bad)
		assert.Error(t, err, bad)
	}
}

func TestAFindingIsReadOutOfTheAuditorsWords(t *testing.T) {
	at := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	f := findingOf("acme-fe3", v2alpha1.ReasonWouldHaveHeld, at,
		"acme-fe3's target 5c1e09aa7f3b started (pod acme-fe3-0, created 2026-11-28T02:59:48Z) while express-sequencer would have held it for 12s more, until 2026-11-28T03:00:00Z; it would have waited: would hold acme-fe3: waiting for acme-fe2 (Frontend) to be Ready on express-e689.160",
		"Event")
	assert.Equal(t, "12s", f.Wait)
	assert.Equal(t, "acme-fe2 (Frontend)", f.WaitingFor)
}

func TestARecoveryIsReadOutOfTheAuditorsWords(t *testing.T) {
	at := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	msg := audit.Describe(audit.Finding{Kind: audit.KindWouldHaveHeld, Recovery: true, Node: audit.NodeKey{Namespace: "acme", Name: "acme-fe4"},
		Pod: "acme-fe4-0", Started: at.Add(-9 * time.Second), ReleasedAt: at, HeldFor: 9 * time.Second,
		Waiting: "recovering: new pods held scheduling-gated; waiting for acme-fe2 (Frontend) to be Ready"})
	f := findingOf("acme-fe4", v2alpha1.ReasonWouldHaveHeld, at, msg, "Event")
	assert.True(t, f.Recovery, msg)
	assert.Equal(t, "9s", f.Wait)
	assert.Equal(t, "acme-fe2 (Frontend)", f.WaitingFor)
	assert.False(t, findingOf("acme-fe3", v2alpha1.ReasonWouldHaveHeld, at, "acme-fe3's target 5c1e09aa7f3b started (pod acme-fe3-0, created 2026-11-28T02:59:48Z) while express-sequencer would have held it for 12s more", "Event").Recovery,
		"a rollout is no recovery")
}

// The audit report's layout at a fixed moment: a table per tenant, the
// findings of each kind, and where they were read; and JSON.
func TestTheAuditReportIsLaidOutAsItsGoldens(t *testing.T) {
	now := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	eventsFrom := now.Add(-time.Hour)
	r := auditReport{Since: now.Add(-7 * 24 * time.Hour), EventsFrom: &eventsFrom, Tenants: []auditTenant{
		{Namespace: "tenant-1", Tenant: "acme", Mode: "audit", NodeRollouts: 10, InOrder: 8, Findings: []auditFinding{
			findingOf("acme-fe3", v2alpha1.ReasonWouldHaveHeld, now.Add(-20*time.Minute),
				"acme-fe3's target 5c1e09aa7f3b started (pod acme-fe3-0, created 2026-11-28T02:40:00Z) while express-sequencer would have held it for 12s more, until 2026-11-28T02:40:12Z; it would have waited: would hold acme-fe3: waiting for acme-fe2 (Frontend) to be Ready on express-e689.160", "Event"),
			findingOf("acme-fe4", v2alpha1.ReasonWouldHaveHeld, now.Add(-3*24*time.Hour),
				"acme-fe4's target 5c1e09aa7f3b started (pod acme-fe4-0, created 2026-11-25T03:00:00Z) while express-sequencer would have held it for 9s more, until 2026-11-25T03:00:09Z; it would have waited: would hold acme-fe4: waiting for acme-fe2 (Frontend) to be Ready on express-e689.160", "condition OrderKept"),
		}},
		{Namespace: "tenant-2", Tenant: "globex", Mode: "enforce", NodeRollouts: 6, InOrder: 5, Findings: []auditFinding{
			findingOf("globex-be", v2alpha1.ReasonOrderViolation, now.Add(-5*time.Minute),
				"pod globex-be-0 was created for target 77aa01c2d9e0 (revision 91234) while globex-be was gated (since revision 91200), running 1b65a483bf7b: the Express operator rolled a gated node; it was waiting: waiting for globex-fe2 (Frontend) to be Ready", "Event"),
		}},
	}, Summary: auditTotal{Tenants: 2, NodeRollouts: 16, InOrder: 13, Violations: 1, WouldHaveHeld: 2}}
	text, err := renderAudit(r, "", now)
	require.NoError(t, err)
	golden.Assert(t, "audit.table", text)
	data, err := json.MarshalIndent(r, "", "  ")
	require.NoError(t, err)
	golden.Assert(t, "audit.json", string(data)+"\n")
}

func TestTheHistoryMarksARolloutWithTheAuditorsFindings(t *testing.T) {
	r := marked(rolloutHistory{Events: []historyEvent{
		{Reason: v2alpha1.ReasonReleased}, {Reason: v2alpha1.ReasonOrderViolation}, {Reason: v2alpha1.ReasonWouldHaveHeld}, {Reason: v2alpha1.ReasonOrderViolation},
	}})
	assert.Equal(t, 2, r.OutOfOrder)
	assert.Equal(t, 1, r.WouldHaveHeld)
}
