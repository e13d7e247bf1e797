package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

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
