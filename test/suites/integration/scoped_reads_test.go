package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
	"github.com/medallia/express-sequencer/internal/webhook"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
)

// With --scoped-reads the sequencer plans a release on its cache and reads
// fresh, by name, only the StatefulSets of the nodes the release rests on;
// the consistent read of the whole tenant is the release guard's, as the
// release is written. These tests give it a cache that lags on purpose.

// scopedReconciler is a sequencer with --scoped-reads whose cache is c and
// whose fresh reads come from fresh.
func scopedReconciler(c *laggingCache, fresh client.Reader) *sequencer.Reconciler {
	r := newLaggingReconciler(c)
	r.Fresh, r.ScopedReads = fresh, true
	r.Guard = sequencer.Guard{Configuration: webhook.ValidatingConfigurationName, Webhooks: webhook.ReleaseGuardWebhooks, Pods: webhook.ReleaseGuardPods, Paths: webhook.ReleaseGuardPaths}
	return r
}

// guardAndNamespace are the release guard's webhook configuration and
// namespace ns, for a cache that knows what the API server has (the
// sequencer reads the guard's registration fresh, not from it).
func guardAndNamespace(t *testing.T, ns string) []client.Object {
	t.Helper()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKey{Name: webhook.ValidatingConfigurationName}, cfg))
	namespace := &corev1.Namespace{}
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKey{Name: ns}, namespace))
	return []client.Object{cfg, namespace}
}

// The backend's StatefulSet is scaled to two pods as fe1 gets a change, and
// no machine takes the new pod. The cache has not seen acme-be-1: it shows
// the backend Ready on its one pod. The scoped read of the backend's
// StatefulSet by name finds it wanting a pod it does not have: fe1 waits,
// and nothing is written for the guard to refuse. With the StatefulSet
// read from the cache instead — which holds none: the tenant is then read
// whole, from the same cache, its pods taken as they are — fe1 is released,
// and only the release guard refuses it: what this test catches.
func TestAScopedReadHoldsTheNextNodeOnAPodTheCacheHasNeverSeen(t *testing.T) {
	ns, before := backendShortOfAPod(t)
	ctx := context.Background()
	tenant := rollout.Tenant{Namespace: ns, ClusterName: "acme"}

	cache := &laggingCache{Client: harness.Client}
	cache.reads = copyOf(t, append(append(append(before, machines(t)...), guardAndNamespace(t, ns)...), read(t, ns, "be"), read(t, ns, "fe1"))...)
	decisionReads := releaseReads(t, rollout.ReadDecision)
	pastSettle()
	require.NoError(t, scopedPass(t, scopedReconciler(cache, harness.Client), tenant), "nothing for the release guard to refuse")
	fe1 := read(t, ns, "fe1")
	assert.True(t, v2alpha1.IsGated(fe1), "fe1 waits for the backend's second pod, whatever the cache says")
	if c := condition(fe1); assert.NotNil(t, c) {
		assert.Contains(t, c.Message, "acme-be", "the wait names the backend")
	}
	assert.Greater(t, releaseReads(t, rollout.ReadDecision), decisionReads,
		"planned on the StatefulSets read by name")

	_, err := scopedReconciler(cache, cache).Reconcile(ctx, tenant)
	require.Error(t, err, "the check can fail: with the StatefulSet read from the cache, fe1 is released")
	assert.Contains(t, err.Error(), "the release of acme-fe1 does not stand on the tenant as it is now: waiting for acme-be", "the release guard names the wait")
	assert.True(t, v2alpha1.IsGated(read(t, ns, "fe1")), "the stale release is refused")
}

// The backend crashes as fe1 gets a change, and the cache has not seen the
// crash. The scoped read reads the backend's pods by name: crashed, not
// Ready; fe1 waits, and nothing is written for the guard to refuse.
func TestAScopedReadHoldsTheNextNodeOnACrashTheCacheHasNotSeen(t *testing.T) {
	ns, before := crashedBackendWithAChange(t)
	cache := &laggingCache{Client: harness.Client}
	cache.reads = copyOf(t, append(append(before, guardAndNamespace(t, ns)...), read(t, ns, "be"), read(t, ns, "fe1"))...)
	pastSettle()
	_, err := scopedReconciler(cache, harness.Client).Reconcile(context.Background(), rollout.Tenant{Namespace: ns, ClusterName: "acme"})
	require.NoError(t, err, "nothing for the release guard to refuse")
	waitsForTheCrashedBackend(t, ns)
}

// The backend is brought back up (the webhook gates it) as fe1 gets a
// change, and the cache still shows it down. The scoped read takes the
// nodes themselves from the cache: it plans fe1's release on a backend
// that is down, and the release guard, reading the whole tenant as the
// release is written, refuses it — the read the release rests on is the
// guard's. fe1 waits.
func TestAReleaseAScopedReadPlansOnANodeChangeTheCacheHasNotSeenIsRefused(t *testing.T) {
	ns, beDown := settledWithDown(t, 2, "be")
	setUp(t, ns, true, "be")
	setVersion(t, ns, v2, "fe1")

	cache := &laggingCache{Client: harness.Client}
	cache.reads = copyOf(t, append(append(podsOf(t, ns), guardAndNamespace(t, ns)...), beDown, read(t, ns, "fe1"))...)
	pastSettle()
	_, err := scopedReconciler(cache, harness.Client).Reconcile(context.Background(), rollout.Tenant{Namespace: ns, ClusterName: "acme"})
	require.Error(t, err, "the release planned on the cache meets the release guard")
	assert.Contains(t, err.Error(), "the release of acme-fe1 does not stand on the tenant as it is now: waiting for acme-be", "the guard refuses it, naming the wait")
	assert.True(t, v2alpha1.IsGated(read(t, ns, "fe1")), "fe1 waits for the backend brought back up")
}

// The machine the backend's pod runs on is lost (its Node deleted; the pod
// still says Ready until the pod garbage collector takes it) as fe1 gets a
// change, and the cache last saw the pods before they were scheduled. The
// scoped read reads the machines of the pods the cache knows with the
// pods, in one round trip: the cache names no machine here, so the
// machine of the pod read is read in a second, found lost, and fe1 waits.
// Given the machines from the cache too (still there), fe1 is released and
// only the release guard refuses it: what this test catches.
func TestAScopedReadReadsTheMachineOfAPodScheduledSinceTheCacheSawIt(t *testing.T) {
	stop := startSequencer(t)
	ns, _ := settledTenant(t, 2)
	stop()
	ctx := context.Background()
	before := podsOf(t, ns)
	var machine string
	for _, o := range before {
		p := o.(*corev1.Pod)
		if p.Labels[v2alpha1.LabelNode] == "acme-be" {
			machine = p.Spec.NodeName
		}
		p.Spec.NodeName = "" // as the cache saw the pods before they were scheduled
	}
	require.NotEmpty(t, machine, "the backend's pod runs on a machine")
	still := machines(t) // the lost one among them
	t.Cleanup(func() { require.NoError(t, cluster.AddNode(ctx, machine+"-again")) })
	require.NoError(t, cluster.DeleteNode(ctx, machine))
	setVersion(t, ns, v2, "fe1")
	cache := &laggingCache{Client: harness.Client}
	cache.reads = copyOf(t, append(append(append(before, still...), guardAndNamespace(t, ns)...), read(t, ns, "be"), read(t, ns, "fe1"))...)
	decisionReads := releaseReads(t, rollout.ReadDecision)
	pastSettle()
	tenant := rollout.Tenant{Namespace: ns, ClusterName: "acme"}
	require.NoError(t, scopedPass(t, scopedReconciler(cache, harness.Client), tenant), "nothing for the release guard to refuse")
	fe1 := read(t, ns, "fe1")
	assert.True(t, v2alpha1.IsGated(fe1), "fe1 waits for the backend, whose machine is lost")
	if c := condition(fe1); assert.NotNil(t, c) {
		assert.Contains(t, c.Message, "acme-be", "the wait names the backend")
	}
	assert.Greater(t, releaseReads(t, rollout.ReadDecision), decisionReads, "planned on the workload read by name")

	_, err := scopedReconciler(cache, cache).Reconcile(ctx, tenant)
	require.Error(t, err, "the check can fail: with the machines read from the cache, fe1 is released")
	assert.Contains(t, err.Error(), "the release of acme-fe1 does not stand on the tenant as it is now: waiting for acme-be", "the release guard names the wait")
	assert.True(t, v2alpha1.IsGated(read(t, ns, "fe1")), "the stale release is refused")
}

// The same crash the cache has not seen, where the release guard is not
// registered (the sequencer is told of a webhook configuration the API
// server does not have): the sequencer does not rest on a guard it cannot
// see — it reads the whole tenant itself, and fe1 waits without a release
// to refuse.
func TestWhereNoReleaseGuardJudgesTheSequencerReadsTheWholeTenantItself(t *testing.T) {
	ns, before := crashedBackendWithAChange(t)
	ctx := context.Background()
	cache := &laggingCache{Client: harness.Client}
	cache.reads = copyOf(t, append(before, read(t, ns, "be"), read(t, ns, "fe1"))...)
	whole, err := auditmetrics.SumWhere("express_sequencer_release_reads_total", map[string]string{"read": rollout.ReadTenant, "fallback": "guard"})
	require.NoError(t, err)
	pastSettle()
	r := scopedReconciler(cache, harness.Client)
	r.Guard.Configuration = "express-sequencer-no-such-guard"
	_, err = r.Reconcile(ctx, rollout.Tenant{Namespace: ns, ClusterName: "acme"})
	require.NoError(t, err, "nothing for the guard to refuse: the sequencer read the tenant itself")
	assert.True(t, v2alpha1.IsGated(read(t, ns, "fe1")), "fe1 waits for the crashed backend")
	after, err := auditmetrics.SumWhere("express_sequencer_release_reads_total", map[string]string{"read": rollout.ReadTenant, "fallback": "guard"})
	require.NoError(t, err)
	assert.Greater(t, after, whole, "counted as a read of the whole tenant for want of the guard")
}

// scopedPass runs passes of r over tenant until one plans on the scoped
// read, up to three, and returns that pass's error. A pass that reads the
// tenant whole instead (see firstPassOnScopedRead) releases nothing in the
// tests that call it, whose fe1 waits: the next pass finds the tenant as
// the first did.
func scopedPass(t *testing.T, r *sequencer.Reconciler, tenant rollout.Tenant) error {
	t.Helper()
	for attempt := 1; ; attempt++ {
		whole, err := passOnScopedRead(context.Background(), r, tenant)
		if whole == "" {
			return err
		}
		require.Less(t, attempt, 3, "the pass read the tenant whole %d times, the last: %s", attempt, whole)
		t.Logf("the pass read the tenant whole (%s): running it again", whole)
	}
}

// releaseReads is how many releases the sequencers of this process planned
// on read.
func releaseReads(t *testing.T, read string) float64 {
	t.Helper()
	n, err := auditmetrics.SumWhere("express_sequencer_release_reads_total", map[string]string{"read": read})
	require.NoError(t, err)
	return n
}

// An operator that names its pods otherwise than its StatefulSet's
// ordinals: where the cache already shows it, the scoped read reads
// nothing by name — not the guard's registration, nor a StatefulSet — and
// the tenant is read whole at once, without paying for a scoped read first.
func TestWhereTheCacheShowsPodsNamedOtherwiseNothingIsReadByName(t *testing.T) {
	stop := startSequencer(t)
	ns, _ := settledTenant(t, 2)
	stop()
	setVersion(t, ns, v2, "fe1")
	pods := podsOf(t, ns)
	for _, o := range pods {
		o.SetName(o.GetName() + "-named-otherwise") // as the cache would show such an operator's pods
	}
	cache := &laggingCache{Client: harness.Client}
	cache.reads = copyOf(t, append(append(pods, guardAndNamespace(t, ns)...), read(t, ns, "be"), read(t, ns, "fe1"))...)
	naming, err := auditmetrics.SumWhere("express_sequencer_release_reads_total", map[string]string{"read": rollout.ReadTenant, "fallback": rollout.FallbackNaming})
	require.NoError(t, err)
	fresh := &countingReader{Reader: harness.Client}
	pastSettle()
	_, err = scopedReconciler(cache, fresh).Reconcile(context.Background(), rollout.Tenant{Namespace: ns, ClusterName: "acme"})
	require.NoError(t, err)
	assert.False(t, v2alpha1.IsGated(read(t, ns, "fe1")), "fe1 is released on the whole tenant")
	after, err := auditmetrics.SumWhere("express_sequencer_release_reads_total", map[string]string{"read": rollout.ReadTenant, "fallback": rollout.FallbackNaming})
	require.NoError(t, err)
	assert.Greater(t, after, naming, "counted as a read of the whole tenant for the naming rule")
	assert.Empty(t, fresh.gotten(), "nothing read by name before the whole tenant")
}

// countingReader records the kinds of the objects read through it by GET.
type countingReader struct {
	client.Reader
	mu   sync.Mutex
	gets []string
}

func (c *countingReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.mu.Lock()
	c.gets = append(c.gets, fmt.Sprintf("%T %s", obj, key))
	c.mu.Unlock()
	return c.Reader.Get(ctx, key, obj, opts...)
}

// gotten are the GETs made other than of machines (the whole tenant's read
// reads the machines of Ready pods by name).
func (c *countingReader) gotten() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, g := range c.gets {
		if !strings.HasPrefix(g, "*v1.Node ") {
			out = append(out, g)
		}
	}
	return out
}
