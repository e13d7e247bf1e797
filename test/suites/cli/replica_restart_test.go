package cli

import (
	"context"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// A replica whose lease is taken from it (as when kube-apiserver does not
// answer its renewal within its renew deadline) stops, webhooks and all, as
// express-sequencer does in a cluster; the test control plane starts it
// again, as the kubelet restarts its container, so that a test on a loaded
// machine is not left with no webhook. The new replica leads under a new
// identity and its webhooks answer.
func TestAReplicaThatLosesItsLeaseIsStartedAgainAndServes(t *testing.T) {
	ctx := context.Background()
	cp, err := controlplane.Start()
	require.NoError(t, err)
	defer func() { assert.NoError(t, cp.Stop()) }()

	o := cp.ManagerOptions(t.TempDir(), logr.Discard())
	o.LeaderElect, o.LeaderElectionNS, o.LeaderElectionID = true, "default", "restart-test"
	o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 2*time.Second, 1500*time.Millisecond, 200*time.Millisecond
	first, stop, err := cp.StartManager(o)
	require.NoError(t, err)
	defer stop()
	<-first.Elected()

	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "restart-test"}}
	require.NoError(t, cp.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease))
	firstHolder := ptr.Deref(lease.Spec.HolderIdentity, "")
	require.NotEmpty(t, firstHolder)

	require.Eventually(t, func() bool { // another holder takes the lease for 5 s
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
			return false
		}
		lease.Spec.HolderIdentity = ptr.To("thief")
		lease.Spec.LeaseDurationSeconds = ptr.To[int32](5)
		lease.Spec.AcquireTime = &metav1.MicroTime{Time: time.Now()}
		lease.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
		return cp.Client.Update(ctx, lease) == nil
	}, 10*time.Second, 10*time.Millisecond)

	var holder string
	require.Eventually(t, func() bool {
		if err := cp.Client.Get(ctx, client.ObjectKeyFromObject(lease), lease); err != nil {
			return false
		}
		holder = ptr.Deref(lease.Spec.HolderIdentity, "")
		return holder != "thief"
	}, time.Minute, 100*time.Millisecond, "a replica leads again once the stolen lease runs out")
	assert.NotEqual(t, firstHolder, holder, "the lease went to a replica started again, not to the first: that one stopped when it lost it")
	require.NoError(t, cp.WaitForWebhooks(ctx, 30*time.Second), "the replica started again serves the webhooks")
}
