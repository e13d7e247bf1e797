package rollout

// The user's old chart renders allNodeConfig as explicit lists (seed 004).
// Their edges are the user's words and the sequencer follows them as they
// are; this is how they order each row of DESIGN §4, side by side with the
// default order, as docs/migrating-from-allnodeconfig.md says. Nodes started
// in the same pass are joined with "+".

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"k8s.io/utils/ptr"
)

// startsByPass returns the rollouts started since mark, those started at
// one tick joined with "+".
func startsByPass(w *world, mark int) string {
	var out []string
	for i := mark; i < len(w.started); i++ {
		if i > mark && w.startedAt[i] == w.startedAt[i-1] {
			out[len(out)-1] += "+" + w.started[i]
			continue
		}
		out = append(out, w.started[i])
	}
	return strings.Join(out, " ")
}

func TestTheOldChartsListsOrderEachRowAsTheMigrationGuideSays(t *testing.T) {
	rows := []struct {
		row           string
		setup, change []step
		def, oldChart string
	}{
		{row: "change to all nodes", change: []step{version(v2, all5...)}, def: "fe1 fe2 be fe3 fe4", oldChart: "fe1 fe2 be fe3 fe4"},
		{row: "change to frontends only", change: []step{version(v2, fes5...)}, def: "fe1 fe2 fe3 fe4", oldChart: "fe1+fe3 fe2+fe4"},
		{row: "change to backend only", change: []step{version(v2, "be")}, def: "be", oldChart: "be"},
		{row: "config-only change to all nodes", change: []step{config("changeset-2", all5...)}, def: "fe1 fe2 be fe3 fe4", oldChart: "fe1 fe2 be fe3 fe4"},
		{row: "fe2 up: false, change to all", setup: []step{up("fe2", ptr.To(false)), settle}, change: []step{version(v2, all5...)},
			def: "fe1 be fe3 fe4", oldChart: "fe1 be fe3 fe4"},
		{row: "change to all while fe3 is crashed", change: []step{crash("fe3"), version(v2, all5...)}, def: "fe1 fe2 be fe3 fe4", oldChart: "fe1 fe2 be fe3 fe4"},
		{row: "change to all that also brings fe3 back up", setup: []step{up("fe3", ptr.To(false)), settle}, change: []step{changeAllUp(5)},
			def: "fe1 fe2 be fe3 fe4", oldChart: "fe1 fe2 be fe3 fe4"},
		{row: "change to all while be is crashed", change: []step{crash("be"), version(v2, all5...)}, def: "be fe1 fe2 fe3 fe4", oldChart: "be fe1+fe3 fe2+fe4"},
		{row: "be crashes while fe2 is rolling a change to all", change: []step{version(v2, all5...), untilStarted("fe2"), crash("be")},
			def: "fe1 fe2 be fe3 fe4", oldChart: "fe1 fe2 be fe3 fe4"},
		{row: "all nodes crashed", change: []step{crash(all5...)}, def: "be fe1 fe2 fe3 fe4", oldChart: "be fe1 fe2 fe3 fe4"},
		{row: "all pods of all nodes deleted at once", change: []step{evict(all5...)}, def: "be fe1 fe2 fe3 fe4", oldChart: "be fe1 fe2 fe3 fe4"},
		{row: "backend crashed, frontend change pending", change: []step{version(v2, fes5...), crash("be")}, def: "be fe1 fe2 fe3 fe4", oldChart: "be fe1+fe3 fe2+fe4"},
		{row: "fe2 and fe4 crashed", change: []step{crash("fe2", "fe4")}, def: "fe2 fe4", oldChart: "fe2+fe4"},
	}
	for _, r := range rows {
		t.Run(r.row, func(t *testing.T) {
			for _, lists := range []struct {
				name   string
				tenant step
				want   string
			}{{"default lists", settled(5), r.def}, {"the old chart's lists", oldChart(5), r.oldChart}} {
				w := newWorld(t, "acme")
				lists.tenant(w)
				for _, s := range r.setup {
					s(w)
				}
				w.phases = []int{len(w.started)}
				for _, s := range r.change {
					s(w)
				}
				settle(w)
				assert.Equal(t, lists.want, startsByPass(w, w.phases[0]), lists.name)
			}
		})
	}
}
