package cli

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// Two replicas as in a cluster with --cert-mode=self-signed: both serve the
// webhooks from one shared CA, one leads the sequencer. The leader — which
// is also the replica the webhook Service sends to — goes away mid-rollout:
// until admission reaches the other replica, writes are refused and say why;
// then they succeed with defaults, and the rollout completes in order.
func TestTwoSelfSignedReplicasSurviveTheLeaderGoingAway(t *testing.T) {
	ctx := context.Background()
	cp, err := controlplane.Start()
	require.NoError(t, err)
	defer func() { assert.NoError(t, cp.Stop()) }()

	portB, stopA, stopB := twoReplicas(t, cp, "replicas-test")
	defer stopB()

	pods, stopStack, err := realStack(cp)
	require.NoError(t, err)
	defer stopStack()

	node := func(key, version string) v2alpha1.Node {
		kind := v2alpha1.KindFrontend
		if key == "be" {
			kind = v2alpha1.KindBackend
		}
		n := v2alpha1.NewNode(kind)
		n.SetName("acme-" + key)
		n.SetNamespace("default")
		*n.NodeSpec() = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "acme"}, ExpressVersion: version}
		return n
	}
	keys := []string{"be", "fe1", "fe2", "fe3", "fe4"}
	for _, k := range keys {
		require.NoError(t, cp.Client.Create(ctx, node(k, "v1")))
	}
	settled := func() bool { ok, _, err := controlplane.Settled(ctx, cp.Client, "default"); return err == nil && ok }
	require.Eventually(t, settled, 2*time.Minute, 50*time.Millisecond)
	mark := len(startsIn(pods, "default"))

	for _, k := range keys {
		require.Eventually(t, func() bool {
			n := node(k, "")
			if cp.Client.Get(ctx, client.ObjectKeyFromObject(n), n) != nil {
				return false
			}
			n.NodeSpec().ExpressVersion = "v2"
			return cp.Client.Update(ctx, n) == nil
		}, 10*time.Second, 10*time.Millisecond)
	}
	require.Eventually(t, func() bool { return len(startsIn(pods, "default")) > mark }, 10*time.Second, 10*time.Millisecond)
	stopA() // the leader and the webhook Service's endpoint, mid-rollout

	err = cp.Client.Create(ctx, node("fe5", "v2"))
	require.Error(t, err, "nothing is admitted while no webhook answers")
	assert.Contains(t, err.Error(), `failed calling webhook "mfrontend.express.medallia.com"`)

	require.NoError(t, cp.PointWebhooksAt(ctx, portB)) // the Service now sends to replica B
	fe5 := node("fe5", "v2")
	require.Eventually(t, func() bool { return cp.Client.Create(ctx, fe5) == nil }, 20*time.Second, 100*time.Millisecond)
	assert.NotNil(t, fe5.NodeSpec().DeploymentDependencies, "admitted with defaults by replica B")

	require.Eventually(t, settled, time.Minute, 50*time.Millisecond)
	// fe5 is new: it is provisioned as soon as the nodes before it are Ready,
	// on whichever version, so it may come anywhere; the upgrade keeps its order.
	var upgraded []string
	provisioned := false
	for _, s := range startsIn(pods, "default")[mark:] {
		if s == "acme-fe5" {
			provisioned = true
			continue
		}
		upgraded = append(upgraded, strings.TrimPrefix(s, "acme-"))
	}
	assert.Equal(t, "fe1 fe2 be fe3 fe4", strings.Join(upgraded, " "), "each node once, in order")
	assert.True(t, provisioned)
	var list corev1.PodList
	require.NoError(t, cp.Client.List(ctx, &list, client.InNamespace("default"), client.HasLabels{v2alpha1.LabelNode}))
	assert.Len(t, list.Items, 6, fmt.Sprint("one pod per node: ", len(list.Items)))
}
