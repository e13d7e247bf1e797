package integration

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
	"github.com/medallia/express-sequencer/internal/webhook"
)

// These tests show the guarantee of the fresh reads (DESIGN §4b): each is
// given a cache that lags on purpose, and each fails if the read it checks
// is taken from that cache.

// cordonAll keeps every machine from taking a new pod until the test ends.
func cordonAll(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	var machines corev1.NodeList
	require.NoError(t, harness.Client.List(ctx, &machines))
	for _, m := range machines.Items {
		require.NoError(t, cluster.Cordon(ctx, m.Name, true))
		t.Cleanup(func() { require.NoError(t, cluster.Cordon(ctx, m.Name, false)) })
	}
}

// machines are the cluster's Nodes, for a cache that also answers the
// question whether a pod's machine is still there.
func machines(t *testing.T) []client.Object {
	t.Helper()
	var list corev1.NodeList
	require.NoError(t, harness.Client.List(context.Background(), &list))
	var out []client.Object
	for i := range list.Items {
		out = append(out, &list.Items[i])
	}
	return out
}

// scale makes node k's StatefulSet want n pods, as its operator would.
func scale(t *testing.T, ns, k string, n int32) {
	t.Helper()
	ctx := context.Background()
	replicasMu.Lock()
	replicas[ns+"/acme-"+k] = n
	replicasMu.Unlock()
	set := &appsv1.StatefulSet{}
	require.NoError(t, harness.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "acme-" + k}, set))
	patch := client.MergeFrom(set.DeepCopy())
	set.Spec.Replicas = ptr.To(n)
	require.NoError(t, harness.Client.Patch(ctx, set, patch))
}

// The backend's StatefulSet is scaled from one pod to two as fe1 gets a
// change, and no machine can take the new pod: the backend is not Ready. A
// cache whose pod informer has not delivered the new pod shows the backend
// Ready on its one pod, and fe1 free to go. The release is planned again on
// fresh reads — the StatefulSet that wants two pods, and acme-be-1, a pod
// the cache never held, not Ready — and fe1 waits (either read alone would
// hold it; the crash test below pins the pods' read by itself). The same
// pass with the cache as its fresh reader — a replica acting on a stale
// view — tries to release fe1, and the API server's release guard refuses
// it: the pass fails, which is what this test catches.
func TestAPodTheCacheHasNeverSeenStillHoldsTheNextNode(t *testing.T) {
	ns, before := backendShortOfAPod(t)
	ctx := context.Background()
	tenant := rollout.Tenant{Namespace: ns, ClusterName: "acme"}

	cache := &laggingCache{Client: harness.Client}
	cache.reads = copyOf(t, append(append(before, machines(t)...), read(t, ns, "be"), read(t, ns, "fe1"))...)
	pastSettle()
	_, err := newLaggingReconciler(cache).Reconcile(ctx, tenant)
	require.NoError(t, err)
	fe1 := read(t, ns, "fe1")
	assert.True(t, v2alpha1.IsGated(fe1), "fe1 waits for the backend's second pod, whatever the cache says")
	if c := condition(fe1); assert.NotNil(t, c) {
		assert.Contains(t, c.Message, "acme-be", "the wait names the backend")
	}

	_, err = staleReplica(cache).Reconcile(ctx, tenant)
	require.Error(t, err, "the check can fail: from the cache alone, fe1 is released")
	assert.Contains(t, err.Error(), "the release of acme-fe1 does not stand on the tenant as it is now: waiting for acme-be", "the release guard names the wait")
	assert.True(t, v2alpha1.IsGated(read(t, ns, "fe1")), "the stale release is refused")
}

// backendShortOfAPod is a settled two-node tenant, the sequencer stopped,
// whose backend's StatefulSet is scaled to two pods that no machine can
// take (acme-be-1 created, never Ready) as fe1 gets a change; it returns
// the namespace and its pods from before the scale (a cache that never
// held acme-be-1).
func backendShortOfAPod(t *testing.T) (string, []client.Object) {
	t.Helper()
	stop := startSequencer(t)
	ns, _ := settledTenant(t, 2)
	stop()
	before := podsOf(t, ns)
	require.Len(t, before, 2, "one pod per node")
	cordonAll(t)
	scale(t, ns, "be", 2)
	require.True(t, waitFor(10*time.Second, func() bool {
		return harness.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "acme-be-1"}, &corev1.Pod{}) == nil
	}), "the StatefulSet creates acme-be-1, which no machine takes")
	setVersion(t, ns, v2, "fe1")
	return ns, before
}

// staleReplica is a sequencer whose every read, fresh ones too, comes from
// cache: a replica acting on a stale view of the tenant.
func staleReplica(cache client.Client) *sequencer.Reconciler {
	return &sequencer.Reconciler{Client: cache, Fresh: cache, Orders: defaults.Builtin(), Clock: clock.RealClock{}, Grouping: grouping, Recorder: events.NewFakeRecorder(100)}
}

// The backend crashes in place, and fe1's StatefulSet asks to create a pod
// (the admission request of fe1's pod made again). A cache whose pod
// informer has not delivered the crash shows the backend Ready. The pod webhook reads
// fresh from the API server: it holds fe1's new pod. Given that cache as its
// reader, it lets the pod start: what this test catches.
func TestThePodWebhookHoldsAPodOnAPredecessorsCrashACacheHasNotSeen(t *testing.T) {
	ns, cache, create := fe1PodAgainOnASettledTenant(t)
	crash(t, ns, "be")
	t.Cleanup(func() { mend(t, ns) })
	ctx := context.Background()

	gate := &webhook.PodGate{Reader: harness.Client, Orders: defaults.Builtin(), Grouping: rollout.DefaultGrouping, Clock: clock.RealClock{}}
	resp := gate.Handle(ctx, create)
	require.True(t, resp.Allowed, "a held pod is admitted: %v", resp.Result)
	assert.True(t, addsTheGate(resp), "fe1's new pod is held for the crashed backend: %v", resp.Patches)

	fromCache := &webhook.PodGate{Reader: cache, Orders: defaults.Builtin(), Grouping: rollout.DefaultGrouping, Clock: clock.RealClock{}}
	resp = fromCache.Handle(ctx, create)
	require.True(t, resp.Allowed)
	assert.False(t, addsTheGate(resp), "the check can fail: from the cache alone, the pod starts")
}

// fe1PodAgainOnASettledTenant is a settled two-node tenant, the sequencer
// stopped, a cache that holds what it has now (nodes, pods, machines), and
// the admission request of fe1's pod created again by its StatefulSet.
func fe1PodAgainOnASettledTenant(t *testing.T) (string, client.Reader, admission.Request) {
	t.Helper()
	stop := startSequencer(t)
	ns, _ := settledTenant(t, 2)
	stop()
	// The copy is of the tenant once it is quiet: a status the simulated
	// operator or a kubelet writes after it would make the copy an older
	// cache than the test means. The machines are not compared: KWOK writes
	// their heartbeats every one to three seconds, which says nothing of
	// the tenant, and a window as long on a loaded machine nearly always
	// holds one.
	var pods []client.Object
	snapshot := func() []client.Object {
		pods = podsOf(t, ns)
		return append(append(slices.Clone(pods), machines(t)...), read(t, ns, "be"), read(t, ns, "fe1"))
	}
	versions := func(objs []client.Object) string {
		var v []string
		for _, o := range objs {
			if _, machine := o.(*corev1.Node); !machine {
				v = append(v, o.GetName()+"@"+o.GetResourceVersion())
			}
		}
		return strings.Join(v, " ")
	}
	objs := snapshot()
	require.True(t, waitFor(10*time.Second, func() bool {
		time.Sleep(300 * time.Millisecond)
		again := snapshot()
		quiet := versions(again) == versions(objs)
		objs = again
		return quiet
	}), "the tenant stays quiet for 300 ms")
	return ns, copyOf(t, objs...), recreated(t, fe1Pod(t, pods))
}

// recreated is the admission request of pod p created again by its
// StatefulSet: the same name, labels and owner, no status.
func recreated(t *testing.T, p *corev1.Pod) admission.Request {
	t.Helper()
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels, OwnerReferences: p.OwnerReferences},
		Spec:       corev1.PodSpec{Containers: p.Spec.Containers},
	}
	raw, err := json.Marshal(pod)
	require.NoError(t, err)
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: admissionv1.Create, Namespace: p.Namespace, Name: p.Name,
		Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Object: runtime.RawExtension{Raw: raw},
	}}
}

// addsTheGate reports whether an admission response adds the sequencer's
// scheduling gate.
func addsTheGate(resp admission.Response) bool {
	return slices.ContainsFunc(resp.Patches, func(op jsonpatch.JsonPatchOperation) bool {
		raw, err := json.Marshal(op.Value)
		return err == nil && op.Operation == "add" && strings.HasPrefix(op.Path, "/spec/schedulingGates") &&
			strings.Contains(string(raw), `"`+v2alpha1.GateSequencer+`"`)
	})
}
