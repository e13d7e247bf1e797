package rollout

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/utils/ptr"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// order renders a prediction as "fe1 | fe2 | be", nodes released together
// joined by a comma.
func order(w *world, p Prediction) string {
	var steps []string
	for _, s := range p.Steps {
		var keys []string
		for _, n := range s.Nodes {
			keys = append(keys, w.key(n))
		}
		steps = append(steps, strings.Join(keys, ","))
	}
	return strings.Join(steps, " | ")
}

// Preview predicts, from the snapshot right after a change lands, the order
// the rollout then really takes in the simulated world.
func TestPreviewPredictsTheOrderTheRolloutTakes(t *testing.T) {
	for _, c := range []struct {
		name   string
		size   int
		setup  func(w *world)
		change func(w *world)
		want   string
	}{
		{"a change to all nodes", 5, nil, func(w *world) { w.setVersion(v2, keysOf(5)...) }, "fe1 | fe2 | be | fe3 | fe4"},
		{"a change to the frontends only", 5, nil, func(w *world) { w.setVersion(v2, frontends(5)...) }, "fe1 | fe2 | fe3 | fe4"},
		{"a change to the backend only", 5, nil, func(w *world) { w.setVersion(v2, "be") }, "be"},
		{"a change to all with fe2 down", 5,
			func(w *world) { w.update("fe2", func(n v2alpha1.Node) { n.NodeSpec().Up = ptr.To(false) }) },
			func(w *world) { w.setVersion(v2, keysOf(5)...) }, "fe1 | be | fe3 | fe4"},
		{"a per-node override", 5, nil, func(w *world) { w.setVersion(v2, "fe3") }, "fe3"},
		{"a config-only change to all", 5, nil, func(w *world) { w.setConfig("changeset-2", keysOf(5)...) }, "fe1 | fe2 | be | fe3 | fe4"},
		{"an explicit reversal of fe1 and fe2 with a change to all", 5, nil, func(w *world) {
			w.update("fe1", func(n v2alpha1.Node) {
				n.NodeSpec().ExpressVersion = v2
				n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{
					ProvisioningPrerequisites: []v2alpha1.Prerequisite{{ExpressNode: w.name("be"), Kind: v2alpha1.KindBackend, PodConditionType: "Ready", ConditionStatus: "True"}},
					UpgradePrerequisites:      []v2alpha1.Prerequisite{{ExpressNode: w.name("fe2"), Kind: v2alpha1.KindFrontend, PodConditionType: "Ready", ConditionStatus: "True"}},
				}
			})
			w.update("fe2", func(n v2alpha1.Node) {
				n.NodeSpec().ExpressVersion = v2
				n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{
					ProvisioningPrerequisites: []v2alpha1.Prerequisite{{ExpressNode: w.name("fe1"), Kind: v2alpha1.KindFrontend, PodConditionType: "Ready", ConditionStatus: "True"}},
					UpgradePrerequisites:      []v2alpha1.Prerequisite{},
				}
			})
			w.setVersion(v2, "be", "fe3", "fe4")
		}, "fe2 | fe1 | be | fe3 | fe4"},
		{"a change to all in a twelve-node tenant", 12, nil, func(w *world) { w.setVersion(v2, keysOf(12)...) },
			"fe1 | fe2 | be | fe3 | fe4 | fe5 | fe6 | fe7 | fe8 | fe9 | fe10 | fe11"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newWorld(t, "acme")
			w.tenant(c.size, v1)
			w.run(400)
			if c.setup != nil {
				c.setup(w)
				w.run(400)
			}
			c.change(w)
			before := w.snapshot()
			p := Preview(before)
			assert.Equal(t, c.want, order(w, p), "predicted")
			assert.Empty(t, p.Stuck)
			for name, n := range before.Nodes {
				require.Equal(t, Gated(n), v2alpha1.IsGated(w.nodes[name]), "Preview leaves the snapshot alone")
			}
			mark := len(w.started)
			w.run(400)
			assert.Equal(t, strings.ReplaceAll(c.want, " | ", " "), w.startedSince(mark), "the rollout takes the predicted order")
		})
	}
}

func TestPreviewNamesWhatStaysStuck(t *testing.T) {
	w := newWorld(t, "acme")
	w.tenant(3, v1)
	w.run(200)
	w.annotate("fe2", v2alpha1.AnnotationPauseRollout, "true")
	w.setVersion(v2, keysOf(3)...)
	p := Preview(w.snapshot())
	assert.Equal(t, "fe1", order(w, p))
	require.Len(t, p.Stuck, 2)
	assert.Equal(t, v2alpha1.ReasonRolloutPaused, p.Stuck[0].Condition.Reason, "be waits for paused fe2")
	assert.Equal(t, v2alpha1.ReasonRolloutPaused, p.Stuck[1].Condition.Reason, "fe2 is paused")
}
