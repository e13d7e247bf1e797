package audit

import (
	"testing"

	"github.com/stretchr/testify/assert"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A namespace labelled express.medallia.com/sequencing="" is enforced by the
// webhooks and the sequencer (v2alpha1.SequencingMode: "any value but audit
// enforces", the label being present), whatever --default-sequencing says.
// With --default-sequencing=audit the auditor read the empty label as
// absent and judged the namespace in audit: the operator rolling a node the
// webhook really gated was then a would-have-held, not the violation it is.
func TestAnEmptySequencingLabelThatTheWebhooksEnforceIsNotJudgedAsAuditByTheAuditor(t *testing.T) {
	a := handFedAuditor("")
	a.DefaultMode = v2alpha1.ModeAudit
	gatedFor2(a) // fe1 carries the sequencer's real gate for 2: only enforce adds one
	found := rollsTo2(a, 30)
	if assert.Len(t, found, 1, "fe1 rolled to 2 while gated since 20") {
		assert.Equal(t, KindRolledWhileGated, found[0].Kind, "a pod made while its node was gated, in a namespace the webhooks enforce, is a violation")
	}
}
