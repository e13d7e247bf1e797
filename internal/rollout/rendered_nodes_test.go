package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A render's rendered-nodes that names no node — empty, or commas and
// blanks alone (a chart that rendered the list empty, a hand-written
// manifest) — is no list. Taken for a render of no node, it left every node
// out of the landing: nothing to agree on, and the tenant held, with a
// message naming no node, until the landing timeout (forever without one).
// Every node carrying the new id, the change goes at once, in the upgrade
// order.
func TestARenderedNodesListNamingNoNodeIsNoList(t *testing.T) {
	for _, list := range []string{"", " ", ",", " , ,"} {
		t.Run("rendered-nodes "+`"`+list+`"`, func(t *testing.T) {
			w := newWorld(t, "acme")
			w.grouping = Grouping{SettleTime: 10 * time.Second, SettleCap: time.Minute} // no landing timeout: held until they agree
			w.tenant(4, v1)
			w.setRolloutID("r1", keysOf(4)...)
			w.run(400)
			mark := len(w.started)
			for _, k := range keysOf(4) {
				w.update(k, func(n v2alpha1.Node) {
					n.NodeSpec().ExpressVersion = v2
					setAnnotation(n, v2alpha1.AnnotationRolloutID, "r2")
					setAnnotation(n, v2alpha1.AnnotationRenderedNodes, list)
				})
			}
			ticks(200)(w)
			assert.Equal(t, "fe1 fe2 be fe3", w.startedSince(mark))
		})
	}
}

func TestWhichNodesARendersListNames(t *testing.T) {
	for name, c := range map[string]struct {
		ann  map[string]string
		want map[string]bool
	}{
		"no annotation is no list":              {ann: map[string]string{}},
		"an empty list is no list":              {ann: map[string]string{v2alpha1.AnnotationRenderedNodes: ""}},
		"commas and blanks alone are no list":   {ann: map[string]string{v2alpha1.AnnotationRenderedNodes: " , ,"}},
		"names are trimmed and blanks left out": {ann: map[string]string{v2alpha1.AnnotationRenderedNodes: " acme-be,, acme-fe1 "}, want: map[string]bool{"acme-be": true, "acme-fe1": true}},
		"one name is a list of one node":        {ann: map[string]string{v2alpha1.AnnotationRenderedNodes: "acme-be"}, want: map[string]bool{"acme-be": true}},
	} {
		t.Run(name, func(t *testing.T) {
			assert.Equal(t, c.want, RenderedNodes(c.ann))
		})
	}
}
