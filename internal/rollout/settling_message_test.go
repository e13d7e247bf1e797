package rollout

import (
	"slices"
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
	left := w.now.Add(-4 * time.Second)
	setAnnotation(w.nodes[w.name("fe1")], v2alpha1.AnnotationNodeLeftTenantAt, left.Format(time.RFC3339Nano))
	s := w.snapshot()
	s.Grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Second}
	l := s.settling(func(v2alpha1.Node) bool { return false }, "a test")
	require.True(t, l.hold, "held 10 s after the departure, 6 s from now")
	assert.Equal(t, 6*time.Second, l.recheckAfter)
	assert.Contains(t, l.message, "a node left tenant acme at "+left.UTC().Format(time.RFC3339))
	assert.Contains(t, l.message, "(deleted, or moved to another tenant)")
	assert.Contains(t, l.message, "held unbroken since "+left.UTC().Format(time.RFC3339Nano), "held unbroken since the departure")
	assert.Equal(t, left.Add(10*time.Second).UTC().Truncate(time.Second), settleHoldEnd(&metav1.Condition{Message: l.message}), "the message says when the hold ends")
}

func TestUnbrokenSince(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	cases := []struct {
		name  string
		holds []span
		want  time.Time
	}{
		{"no hold has held since no time", nil, time.Time{}},
		{"one hold covering now has held since its change", []span{{at(-4), at(6)}}, at(-4)},
		{"overlapping holds have held since the earliest of them", []span{{at(-3), at(7)}, {at(-12), at(-2)}, {at(-20), at(-10)}}, at(-20)},
		{"a hold beginning as the one before ends continues it", []span{{at(-20), at(-10)}, {at(-10), at(5)}}, at(-20)},
		{"a gap before the hold covering now begins the run there", []span{{at(-30), at(-20)}, {at(-5), at(5)}}, at(-5)},
		{"holds given in any order join while each begins before the run ends", []span{{at(-30), at(-1)}, {at(1), at(11)}, {at(-3), at(8)}}, at(-30)},
		{"a capped change holds nothing and bridges no gap", []span{{at(-30), at(-20)}, {at(-19), at(-19)}, {at(-10), at(5)}}, at(-10)},
		{"a change capped before it was made holds nothing", []span{{at(-8), at(-9)}, {at(-2), at(8)}}, at(-2)},
		{"a later run after the one covering now is left out", []span{{at(-5), at(5)}, {at(9), at(20)}}, at(-5)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, unbrokenSince(slices.Clone(c.holds), now))
		})
	}
}

// A departure date more than a second ahead of the sequencer's clock is
// one a replica whose clock ran ahead wrote: it is named, to be dated again
// at now; one within a second, or in the past, is not.
func TestDepartureDatesAheadOfTheClockAreNamed(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(4, v1)
	for key, at := range map[string]time.Time{"be": w.now.Add(24 * time.Hour), "fe1": w.now.Add(500 * time.Millisecond), "fe2": w.now.Add(-time.Minute), "fe3": w.now.Add(2 * time.Second)} {
		setAnnotation(w.nodes[w.name(key)], v2alpha1.AnnotationNodeLeftTenantAt, at.Format(time.RFC3339Nano))
	}
	assert.Equal(t, []string{w.name("be"), w.name("fe3")}, FutureDepartures(w.snapshot()))
}
