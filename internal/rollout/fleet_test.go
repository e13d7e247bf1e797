package rollout

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// A fleet read across namespaces is split into its tenants — by namespace,
// then cluster name, each with its own nodes — sorted.
func TestAFleetIsSplitIntoItsTenantsSorted(t *testing.T) {
	node := func(namespace, cluster, key string) v2alpha1.Node {
		kind := v2alpha1.KindFrontend
		if key == "be" {
			kind = v2alpha1.KindBackend
		}
		n := v2alpha1.NewNode(kind)
		n.SetName(cluster + "-" + key)
		n.SetNamespace(namespace)
		*n.NodeSpec() = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: cluster}, ExpressVersion: v1}
		return n
	}
	read := Objects{Nodes: []v2alpha1.Node{
		node("ns-b", "zeta", "be"), node("ns-a", "acme", "be"), node("ns-a", "acme", "fe1"),
		node("ns-b", "beta", "be"), node("ns-b", "beta", "fe1"), node("ns-b", "beta", "fe2"),
	}}
	fleet := FleetOf(read, defaults.Builtin(), time.Now(), 0, Grouping{})
	var got []string
	var live []int
	for _, f := range fleet {
		got = append(got, f.Tenant.Namespace+"/"+f.Tenant.ClusterName)
		live = append(live, f.Live)
		assert.Len(t, f.Nodes, f.Live, "its own nodes")
	}
	assert.Equal(t, []string{"ns-a/acme", "ns-b/beta", "ns-b/zeta"}, got)
	assert.Equal(t, []int{2, 3, 1}, live)
}
