package integration

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/webhook"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
)

// With --pod-reads-by-name the pod webhook lets a new Express pod start on a
// read by name of what its start rests on — its node, the nodes it may
// require and their workload (sequencer.GatherForPod) — the cache only
// guessing the names; where that read does not let it start, the tenant is
// read whole, as without the flag. These tests give it a cache that lags on
// purpose.

// byNameGate is the pod webhook with --pod-reads-by-name, guessing from cache
// and reading from fresh.
func byNameGate(cache, fresh client.Reader) *webhook.PodGate {
	return &webhook.PodGate{Reader: fresh, Cache: cache, Orders: defaults.Builtin(), Grouping: rollout.DefaultGrouping, Clock: clock.RealClock{}}
}

// fe1Pod is fe1's pod among pods.
func fe1Pod(t *testing.T, pods []client.Object) *corev1.Pod {
	t.Helper()
	for _, p := range pods {
		if p.GetLabels()[v2alpha1.LabelNode] == "acme-fe1" {
			return p.(*corev1.Pod)
		}
	}
	t.Fatal("fe1 has no pod")
	return nil
}

// podAdmissionReads is how many pod admissions of this process were
// answered on read, for the reason fallback ("" for any).
func podAdmissionReads(t *testing.T, read, fallback string) float64 {
	t.Helper()
	where := map[string]string{"read": read}
	if fallback != "" {
		where["fallback"] = fallback
	}
	n, err := auditmetrics.SumWhere("express_sequencer_pod_admission_reads_total", where)
	require.NoError(t, err)
	return n
}

// A settled tenant: fe1's StatefulSet creates its pod again. Read by name —
// fe1, the Backend it requires, the Backend's StatefulSet, pod and machine
// — the Backend is Ready: the pod starts ungated, answered on that read
// alone.
func TestAPodWhosePredecessorsAreReadyStartsOnTheirReadByName(t *testing.T) {
	_, cache, create := fe1PodAgainOnASettledTenant(t)
	byName := podAdmissionReads(t, rollout.ReadDecision, "none")

	// A yes by name rests on two reads that find what they read unchanged:
	// a write between them (a machine's heartbeat, which KWOK writes every
	// one to three seconds) has the tenant read whole, as it should. The
	// admission only reads: it is answered again, up to three times, until
	// one is answered by name.
	for attempt := 1; attempt <= 3 && podAdmissionReads(t, rollout.ReadDecision, "none") == byName; attempt++ {
		resp := byNameGate(cache, harness.Client).Handle(context.Background(), create)
		require.True(t, resp.Allowed, "%v", resp.Result)
		assert.False(t, addsTheGate(resp), "the Backend is Ready: fe1's pod starts")
	}
	assert.Equal(t, byName+1, podAdmissionReads(t, rollout.ReadDecision, "none"), "let start on the read by name (answered on the whole tenant, for any reason, so far: %v)",
		podAdmissionReads(t, rollout.ReadTenant, ""))
}

// The backend crashes in place, and fe1's StatefulSet creates its pod
// again. A cache whose pod informer has not delivered the crash shows the
// backend Ready. The read by name reads the backend's pods from the API
// server: crashed, they hold fe1's pod, which is gated on that read alone
// in an enforcing namespace. In audit, the whole tenant is read then, to
// say what would have held it. With the pods read by name from that cache
// instead, the pod starts: what this test catches.
func TestAPodReadByNameIsHeldOnAPredecessorsCrashACacheHasNotSeen(t *testing.T) {
	ns, cache, create := fe1PodAgainOnASettledTenant(t)
	crash(t, ns, "be")
	t.Cleanup(func() { mend(t, ns) })
	ctx := context.Background()
	heldByName := podAdmissionReads(t, rollout.ReadDecision, "held")

	resp := byNameGate(cache, harness.Client).Handle(ctx, create)
	require.True(t, resp.Allowed, "a held pod is admitted: %v", resp.Result)
	assert.True(t, addsTheGate(resp), "fe1's new pod is held for the crashed backend: %v", resp.Patches)
	assert.Equal(t, heldByName+1, podAdmissionReads(t, rollout.ReadDecision, "held"), "held on the read by name alone")

	tenants.SetMode(t, ns, v2alpha1.ModeAudit)
	t.Cleanup(func() { tenants.SetMode(t, ns, "") })
	held := podAdmissionReads(t, rollout.ReadTenant, "held")
	resp = byNameGate(cache, harness.Client).Handle(ctx, create)
	require.True(t, resp.Allowed, "%v", resp.Result)
	assert.False(t, addsTheGate(resp), "audit holds no pod")
	assert.True(t, slices.ContainsFunc(resp.Patches, func(op jsonpatch.JsonPatchOperation) bool {
		raw, err := json.Marshal(op.Value)
		return err == nil && strings.Contains(string(raw), "acme-be")
	}), "what enforcing would have held it for, read on the whole tenant: %v", resp.Patches)
	assert.Equal(t, held+1, podAdmissionReads(t, rollout.ReadTenant, "held"), "in audit the whole tenant is read")

	resp = byNameGate(cache, cache).Handle(ctx, create)
	require.True(t, resp.Allowed)
	assert.False(t, addsTheGate(resp), "the check can fail: read by name from the cache, the pod starts")
}
