package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

// fleetNode is node key of a tenant, on version.
func fleetNode(namespace, cluster, key, version string) v2alpha1.Node {
	kind := v2alpha1.KindFrontend
	if key == "be" {
		kind = v2alpha1.KindBackend
	}
	n := v2alpha1.NewNode(kind)
	n.SetName(cluster + "-" + key)
	n.SetNamespace(namespace)
	*n.NodeSpec() = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: cluster}, ExpressVersion: version}
	return n
}

// A fleet read across namespaces is split into its tenants — by namespace,
// then cluster name, each with its own nodes — sorted.
func TestAFleetIsSplitIntoItsTenantsSorted(t *testing.T) {
	node := func(namespace, cluster, key string) v2alpha1.Node { return fleetNode(namespace, cluster, key, v1) }
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

// Tenants are planned on every core at once, and each gets the answer it
// gets planned alone: many tenants, two to a namespace, in different
// states (nodes on two versions, some gated, pods missing or not Ready).
func TestAFleetPlannedInParallelGetsEachTenantsOwnAnswer(t *testing.T) {
	now := time.Now()
	var read Objects
	for i := range 60 {
		namespace, cluster := fmt.Sprintf("ns-%02d", i/2), fmt.Sprintf("t%d", i%2)
		for j, key := range []string{"be", "fe1", "fe2"} {
			version := v1
			if (i+j)%3 == 0 {
				version = v2
			}
			n := fleetNode(namespace, cluster, key, version)
			if i%4 == 1 && key != "be" {
				n.NodeSpec().RolloutGates = []v2alpha1.RolloutGate{{Name: v2alpha1.GateSequencer}}
			}
			read.Nodes = append(read.Nodes, n)
			if i%5 != 0 {
				pod := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: n.GetName() + "-0", Namespace: namespace,
					Labels: map[string]string{v2alpha1.LabelNode: n.GetName(), v2alpha1.LabelExpressVersion: v1}}}
				ready := corev1.ConditionTrue
				if (i+j)%7 == 0 {
					ready = corev1.ConditionFalse
				}
				pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}
				read.Pods = append(read.Pods, pod)
			}
		}
	}
	fleet := FleetOf(read, defaults.Builtin(), now, time.Hour, DefaultGrouping)
	assert.Len(t, fleet, 60)
	answers := map[string]int{}
	for _, f := range fleet {
		var own Objects
		for _, n := range read.Nodes {
			if n.GetNamespace() == f.Tenant.Namespace {
				own.Nodes = append(own.Nodes, n)
			}
		}
		for _, p := range read.Pods {
			if p.Namespace == f.Tenant.Namespace {
				own.Pods = append(own.Pods, p)
			}
		}
		s := SnapshotOf(own, f.Tenant, defaults.Builtin(), now)
		s.ProgressDeadline, s.Grouping = time.Hour, DefaultGrouping
		alone := ProgressOf(s, Plan(s))
		assert.Equal(t, alone, f.Progress, "%s", f.Tenant)
		answers[fmt.Sprintf("%s %d/%d %v %v", f.State, f.OnTarget, f.Live, f.Rolling, f.Next)]++
	}
	assert.Greater(t, len(answers), 3, "the tenants' answers differ: %v", answers)
}

// explodingNode is a Frontend whose annotations cannot be read: planning it
// panics.
type explodingNode struct{ *v2alpha1.Frontend }

func (explodingNode) GetAnnotations() map[string]string { panic("this node cannot be planned") }

// A panic while planning one tenant, on a worker goroutine, is raised again
// in FleetOf's caller, where it can be recovered, instead of ending the
// process from a goroutine no one can recover.
func TestAPanicPlanningOneTenantOfAFleetReachesTheCaller(t *testing.T) {
	var read Objects
	for i := range 10 {
		read.Nodes = append(read.Nodes, fleetNode(fmt.Sprintf("ns-%d", i), "acme", "fe1", v1))
	}
	bad := fleetNode("ns-5", "acme", "fe2", v1).(*v2alpha1.Frontend)
	read.Nodes = append(read.Nodes, explodingNode{bad})
	assert.PanicsWithValue(t, "this node cannot be planned", func() {
		FleetOf(read, defaults.Builtin(), time.Now(), time.Hour, DefaultGrouping)
	})
}
