package cluster

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// oracleEvents builds a log of a tenant of be, fe1 and fe2 on one replica
// each, every node on target "h2": each event is stored at its revision
// and delivered to the oracle at its offset from t0.
type oracleEvents struct {
	t0  time.Time
	log orderLog
}

func (o *oracleEvents) add(rv uint64, delivered time.Duration, e observed) *oracleEvents {
	o.log.record(e, strconv.FormatUint(rv, 10), o.t0.Add(delivered))
	return o
}

// node stores node name (gated or not) at rv.
func (o *oracleEvents) node(rv uint64, delivered time.Duration, name string, gated bool) *oracleEvents {
	return o.add(rv, delivered, observed{node: "acme-" + name, sequencerGated: gated, target: "h2", nodeUID: name + "-uid"})
}

// pod stores the pod of node name on hash, Ready or not, at rv.
func (o *oracleEvents) pod(rv uint64, delivered time.Duration, name, hash string, ready bool) *oracleEvents {
	return o.add(rv, delivered, observed{pod: true, node: "acme-" + name, uid: name + "-" + hash, name: "acme-" + name + "-0", ready: ready, hash: hash})
}

// missedDeletion records the deletion of node name's pod on hash, which a
// watch missed (its final state unknown), delivered at delivered.
func (o *oracleEvents) missedDeletion(delivered time.Duration, name, hash string) *oracleEvents {
	o.log.record(observed{pod: true, node: "acme-" + name, uid: name + "-" + hash, deleted: true}, "", o.t0.Add(delivered))
	return o
}

// inRevisionOrder is the log as orderLog.snapshot gives it.
func (o *oracleEvents) inRevisionOrder() []observed { return o.log.snapshot() }

// settled is a tenant whose be and fe1 run Ready on h2 and fe2 is gated,
// all delivered by 1 s.
func settled(t0 time.Time) *oracleEvents {
	o := &oracleEvents{t0: t0}
	return o.node(1, 0, "be", false).node(2, 0, "fe1", false).node(3, 0, "fe2", true).
		pod(4, 0, "be", "h2", true).pod(5, 0, "fe1", "h2", false).pod(6, 0, "fe2", "h1", true)
}

func TestTheOrderOracleJudgesByTheRevisionsTheAPIServerStored(t *testing.T) {
	t0 := time.Now()
	for _, row := range []struct {
		name   string
		events *oracleEvents
		flags  bool
	}{
		{
			name:   "fe2 released after fe1 was Ready is in order",
			events: settled(t0).pod(7, 2*time.Second, "fe1", "h2", true).node(8, 3*time.Second, "fe2", false),
		},
		{
			name: "fe2 released after fe1 was Ready is in order though the release was delivered before the Ready",
			// The pods' informer lagged the nodes': arrival order would say
			// fe2 went first.
			events: settled(t0).pod(7, 5*time.Second, "fe1", "h2", true).node(8, 3*time.Second, "fe2", false),
		},
		{
			name:   "fe2 released before fe1 was Ready is found though the Ready was delivered first",
			events: settled(t0).pod(9, 2*time.Second, "fe1", "h2", true).node(8, 3*time.Second, "fe2", false),
			flags:  true,
		},
		{
			name: "fe2 released just after fe1 lost its pod, within the slack of the read the release rests on, is in order",
			events: settled(t0).pod(7, 2*time.Second, "fe1", "h2", true).
				add(8, 2800*time.Millisecond, observed{pod: true, node: "acme-fe1", uid: "fe1-h2", deleted: true}).
				node(9, 3*time.Second, "fe2", false),
		},
		{
			name: "fe2 released long after fe1 lost its pod is found",
			events: settled(t0).pod(7, 2*time.Second, "fe1", "h2", true).
				add(8, 2500*time.Millisecond, observed{pod: true, node: "acme-fe1", uid: "fe1-h2", deleted: true}).
				node(9, 5*time.Second, "fe2", false),
			flags: true,
		},
		{
			name: "fe2 released long after fe1 lost its pod is found though an event stored before the loss was delivered within the slack",
			// be's pod update, stored between fe1's Ready and its loss,
			// came late: it does not take the window back past the loss.
			events: settled(t0).pod(7, 2*time.Second, "fe1", "h2", true).pod(8, 4500*time.Millisecond, "be", "h2", true).
				add(9, 2100*time.Millisecond, observed{pod: true, node: "acme-fe1", uid: "fe1-h2", deleted: true}).
				node(10, 5*time.Second, "fe2", false),
			flags: true,
		},
		{
			name: "fe2 released after a deletion of fe1's pod the watch missed counts the pod until the newest revision seen",
			// The oracle errs lenient where it cannot know.
			events: settled(t0).pod(7, 2*time.Second, "fe1", "h2", true).node(8, 3*time.Second, "fe2", false).
				missedDeletion(3100*time.Millisecond, "fe1", "h2"),
		},
		{
			name: "fe2 released long after a deletion of fe1's pod the watch missed is found",
			// The deletion is placed after fe1's Ready, at the newest
			// revision seen, not before it.
			events: settled(t0).pod(7, 2*time.Second, "fe1", "h2", true).missedDeletion(2500*time.Millisecond, "fe1", "h2").
				node(8, 5*time.Second, "fe2", false),
			flags: true,
		},
		{
			name: "fe2 released just after fe1 lost its pod is in order though the release was delivered long after it was stored",
			// The nodes' informer lagged: be's pod update, stored after the
			// release and delivered at once, bounds when the release was
			// stored; counted from the release's delivery, fe1's loss
			// would be more than the slack before it.
			events: settled(t0).pod(7, 2*time.Second, "fe1", "h2", true).
				add(8, 2200*time.Millisecond, observed{pod: true, node: "acme-fe1", uid: "fe1-h2", deleted: true}).
				node(9, 5*time.Second, "fe2", false).pod(10, 2400*time.Millisecond, "be", "h2", true),
		},
		{
			name:   "fe2 released while fe1 ran Ready on the old target is found",
			events: settled(t0).pod(7, 2*time.Second, "fe1", "h1", true).node(8, 3*time.Second, "fe2", false),
			flags:  true,
		},
	} {
		t.Run(row.name, func(t *testing.T) {
			// The change is judged from after the settled tenant.
			failures := orderFailures(row.events.inRevisionOrder(), t0.Add(time.Second), 1)
			if row.flags {
				assert.NotEmpty(t, failures)
				for _, f := range failures {
					assert.Contains(t, f, "acme-fe2 released")
					assert.Contains(t, f, "acme-fe1")
				}
			} else {
				assert.Empty(t, failures)
			}
		})
	}
}
