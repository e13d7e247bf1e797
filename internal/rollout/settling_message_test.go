package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// Changes capped at the same instant (one run of changes that began at
// once) hold until the same moment; the Settling message names the latest
// of them, whatever order the tenant's nodes are read in.
func TestASettlingHoldNamesTheLatestOfChangesCappedAtOneInstant(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(5, v1)
	began := w.now.Add(-25 * time.Second)
	for i, key := range []string{"be", "fe1", "fe2", "fe3", "fe4"} {
		changed(began.Add(20*time.Second+time.Duration(i)*2*time.Second), began)(w.nodes[w.name(key)])
	}
	s := w.snapshot()
	s.Grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: 30 * time.Second}
	latest := began.Add(28 * time.Second).UTC().Format(time.RFC3339)
	for range 50 { // map order differs between passes
		l := s.settling(func(v2alpha1.Node) bool { return true }, "a test")
		require.True(t, l.hold, "the cap ends at began+30 s, 5 s from now")
		assert.Equal(t, 5*time.Second, l.recheckAfter)
		assert.Contains(t, l.message, "the one holding longest at "+latest)
	}
}

// A node that left the tenant holds it for the settle time after the date
// written on the nodes that stay, on a tenant with rollout-id too (nothing
// counted), past every node's settle cap, and the Settling message says a
// node left.
func TestASettlingHoldForANodeThatLeftSaysSo(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	left := w.now.Add(-4*time.Second + 300*time.Millisecond)
	setAnnotation(w.nodes[w.name("fe1")], v2alpha1.AnnotationNodeLeftTenantAt, left.Format(time.RFC3339Nano))
	s := w.snapshot()
	s.Grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Second}
	l := s.settling(func(v2alpha1.Node) bool { return false }, "a test")
	require.True(t, l.hold, "held 10 s after the departure, 6.3 s from now")
	assert.Equal(t, 6*time.Second+300*time.Millisecond, l.recheckAfter)
	assert.Contains(t, l.message, "a node left tenant acme at "+left.UTC().Format(time.RFC3339))
	assert.Contains(t, l.message, "(deleted, or moved to another tenant)")
	assert.Equal(t, left.Add(10*time.Second).UTC().Truncate(time.Second).Add(time.Second), settleHoldEnd(&metav1.Condition{Message: l.message}), "the message says when the hold ends, rounded up to the second")
}

// A departure date the settle time or more ahead of the sequencer's clock
// is one a replica whose clock ran ahead wrote: it is named, to be dated
// again at now; one ahead by less (held for less than twice the settle
// time), or in the past, is not, nor is any when the settle time is off.
func TestDepartureDatesAheadOfTheClockAreNamed(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(5, v1)
	for key, at := range map[string]time.Time{"be": w.now.Add(24 * time.Hour), "fe1": w.now.Add(9 * time.Second), "fe2": w.now.Add(-time.Minute), "fe3": w.now.Add(10 * time.Second)} {
		setAnnotation(w.nodes[w.name(key)], v2alpha1.AnnotationNodeLeftTenantAt, at.Format(time.RFC3339Nano))
	}
	s := w.snapshot()
	s.Grouping = Grouping{SettleTime: 10 * time.Second}
	assert.Equal(t, []string{w.name("be"), w.name("fe3")}, FutureDepartures(s))
	s.Grouping = Grouping{}
	assert.Empty(t, FutureDepartures(s), "the settle time off: no date holds")
}
