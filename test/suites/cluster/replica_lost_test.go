package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// A backend of three replicas loses one while fe1 rolls a change to all:
// its StatefulSet recreates the pod under the same name on the backend's
// current target. Not Ready for a moment is not a backend that needs a
// release: be keeps its turn after fe2 (its recreated pod is on v1, and no
// v2 pod of be starts before fe2's last is Ready on v2), and nothing after
// fe1 starts before fe1's three pods are Ready on v2.
func TestABackendThatLosesOneOfThreeReplicasWhileFe1RollsKeepsItsTurn(t *testing.T) {
	ctx := context.Background()
	ns := settledTenant(t, 4, 3)
	mark := time.Now()
	setVersion(t, ns, v2, keys(4)...)
	waitReleased(t, ns, "fe1")
	lost := &corev1.Pod{}
	require.NoError(t, harness.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-be-1"}, lost))
	lostAt := time.Now()
	require.NoError(t, harness.Client.Delete(ctx, lost))
	waitSettled(t, ns)

	// The order of the change: the first v2 pod of each node bound after
	// every v2 pod of the node before it was Ready.
	firstOnV2, lastReadyOnV2 := map[string]time.Time{}, map[string]time.Time{}
	var order []string
	recreated := false
	for _, e := range pods.Since(ns, mark) {
		switch {
		case e.Terminating:
		case e.Ready:
			if e.Version == v2 {
				lastReadyOnV2[e.Node] = e.At
			}
		case e.Version == v2:
			if firstOnV2[e.Node].IsZero() {
				firstOnV2[e.Node] = e.At
				order = append(order, e.Node)
			}
		case e.Node == "acme-be" && e.Pod == "acme-be-1" && e.At.After(lostAt):
			recreated = true
		}
	}
	assert.True(t, recreated, "the StatefulSet recreated acme-be-1 on the backend's current target, v1")
	assert.Equal(t, []string{"acme-fe1", "acme-fe2", "acme-be", "acme-fe3"}, order, "the order of the change")
	for i := 1; i < len(order); i++ {
		prev, cur := order[i-1], order[i]
		assert.True(t, firstOnV2[cur].After(lastReadyOnV2[prev]), "%s's first v2 pod (%s) after %s's last v2 pod Ready (%s)",
			cur, firstOnV2[cur].Format(time.StampMilli), prev, lastReadyOnV2[prev].Format(time.StampMilli))
	}
}
