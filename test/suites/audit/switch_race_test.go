package audit

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
	"github.com/medallia/express-sequencer/test/framework/tenant"
)

// keepPod is another controller's finalizer on a pod: it keeps the pod
// Terminating, and so its StatefulSet from making its replacement, until
// that controller lets go.
const keepPod = "example.com/keep"

// The race the switch rows exclude by holding the operator still while the
// switch lands: a rollout the operator began in audit whose new pod
// Kubernetes makes after the switch. fe3 is changed alone in audit (a
// render's first write: its rollout-id, which the rest of the tenant does
// not carry yet, holds the sequencer's audit plan from recording fe3
// released, however long the next steps take) and the operator rolls it at
// once — its StatefulSet moved to the new target, its old pod still going
// (kept here by another controller's finalizer, as a slow shutdown would),
// its new pod not made yet. The operator is held still while the
// namespace is switched to enforce and the rest of the render lands (be,
// fe1, fe2), fe1 paused so that no node of the tenant is released yet;
// then the StatefulSet controller makes fe3's new pod. fe3's provisioning
// prerequisites are all Ready and none is in flight, so the pod rule alone
// would start it at once; it is made for a target fe3 was never released
// for, so it waits for that release: after fe1, fe2 and be are Ready on
// the new target, once fe1's pause is lifted.
func TestAPodTheOperatorRolledIntoTheSwitchWaitsForItsNodesReleaseInOrder(t *testing.T) {
	ctx := context.Background()
	violationsBefore := counted(t, auditmetrics.Violations)
	var ns string
	var mark time.Time
	var made corev1.Pod
	for attempt := 1; ; attempt++ {
		var raced bool
		if ns, mark, made, raced = rollIntoTheSwitch(ctx, t); raced {
			break
		}
		// The StatefulSet controller made the pod from the old revision,
		// which fe3 was released for: the race was not run; run it again
		// on a new tenant.
		require.Less(t, attempt, 3, "the StatefulSet controller made fe3's pod of its old revision %d times", attempt)
		t.Logf("fe3's pod was made again of its old revision in %s: running the race again", ns)
	}
	assert.Contains(t, made.Spec.SchedulingGates, corev1.PodSchedulingGate{Name: v2alpha1.GateSequencer}, "fe3's new pod is made gated")
	for _, k := range tenant.Keys(4) {
		n := tenant.Node(ns, k)
		require.NoError(t, harness.Client.Get(ctx, client.ObjectKeyFromObject(n), n))
		require.NotEqual(t, n.GetAnnotations()[v2alpha1.AnnotationTargetHash], n.GetAnnotations()[v2alpha1.AnnotationReleasedTarget],
			"the race is run: %s is not released for the new target when fe3's pod is made", k)
	}
	tenants.Update(t, ns, func(n v2alpha1.Node) { setAnnotation(n, v2alpha1.AnnotationPauseRollout, "") }, "fe1")
	tenants.WaitSettled(t, ns, 4, 2*time.Minute, nil)

	beReady, ok := first(ns, "be", v2, true)
	require.True(t, ok, "be Ready on v2")
	var fe3 corev1.Pod
	var started bool
	for _, e := range tenants.Pods.Since(ns, mark) {
		if e.Node == tenant.ClusterName+"-fe3" && e.Version == v2 && !e.Ready && !e.Terminating {
			assert.True(t, e.At.After(beReady.At), "fe3's new pod starts after be is Ready on v2 (started %s, be Ready %s)",
				e.At.Format(time.StampMilli), beReady.At.Format(time.StampMilli))
			require.NoError(t, harness.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: e.Pod}, &fe3))
			started = true
			break
		}
	}
	require.True(t, started, "fe3's pod on v2 starts")
	assert.Equal(t, made.UID, fe3.UID, "the pod made in the race is the one that started")
	for _, k := range []string{"fe2", "be"} {
		prev := map[string]string{"fe2": "fe1", "be": "fe2"}[k]
		ready, ok := first(ns, prev, v2, true)
		require.True(t, ok, "%s Ready on v2", prev)
		start, ok := first(ns, k, v2, false)
		require.True(t, ok, "%s starts on v2", k)
		assert.True(t, start.At.After(ready.At), "%s starts after %s is Ready", k, prev)
	}
	judged(t)
	assert.Equal(t, violationsBefore, counted(t, auditmetrics.Violations), "nothing rolled while gated across the switch")
}

// rollIntoTheSwitch runs the race on a new tenant up to fe3's new pod: it
// returns the tenant's namespace, when the change began, the pod and
// whether it is of the new target (raced), fe1 still paused.
func rollIntoTheSwitch(ctx context.Context, t *testing.T) (ns string, mark time.Time, made corev1.Pod, raced bool) {
	t.Helper()
	ns = namespace(t, expressoperator.Breakage{}, inAudit)
	tenants.Create(t, ns, 4, v1, nil)
	tenants.WaitSettled(t, ns, 4, 2*time.Minute, nil)
	readyAfter.Store(ns, 2*time.Second)
	render := func(pause string) func(v2alpha1.Node) {
		return func(n v2alpha1.Node) {
			n.NodeSpec().ExpressVersion = v2
			setAnnotation(n, v2alpha1.AnnotationRolloutID, "race-r2")
			setAnnotation(n, v2alpha1.AnnotationPauseRollout, pause)
		}
	}

	old := &corev1.Pod{}
	old.Namespace, old.Name = ns, tenant.ClusterName+"-fe3-0"
	require.NoError(t, harness.Client.Patch(ctx, old, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":["`+keepPod+`"]}}`))))
	oldUID := old.UID
	let := func() {
		require.Eventually(t, func() bool {
			var p corev1.Pod
			if err := harness.Client.Get(ctx, client.ObjectKeyFromObject(old), &p); err != nil || p.UID != oldUID {
				return apierrors.IsNotFound(err) || err == nil // gone: made again, or not yet
			}
			p.Finalizers = slices.DeleteFunc(p.Finalizers, func(f string) bool { return f == keepPod })
			return harness.Client.Update(ctx, &p) == nil
		}, 10*time.Second, 50*time.Millisecond, "the finalizer on fe3's old pod removed")
	}
	defer let()

	mark = time.Now()
	tenants.Update(t, ns, render(""), "fe3")
	// The pod delays changed above are in the template too: an operator
	// whose cache has not seen fe3's change yet rolls fe3's StatefulSet to
	// them on v1 first, and its old pod goes for that. The roll the race is
	// about is to v2.
	set := &appsv1.StatefulSet{}
	require.Eventually(t, func() bool {
		return harness.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tenant.ClusterName + "-fe3"}, set) == nil &&
			set.Spec.Template.Labels[v2alpha1.LabelExpressVersion] == v2 &&
			harness.Client.Get(ctx, client.ObjectKeyFromObject(old), old) == nil && old.DeletionTimestamp != nil
	}, 30*time.Second, 20*time.Millisecond, "in audit the operator rolls fe3 to v2 at once: its StatefulSet deletes fe3's old pod")
	broken.Set(ns, expressoperator.Breakage{Paused: true})
	require.Eventually(t, func() bool { return operator.Quiet(ns) }, 10*time.Second, 5*time.Millisecond, "the operator's reconciles under way end")
	tenants.SetMode(t, ns, v2alpha1.ModeEnforce)
	require.Eventually(t, func() bool { return slices.Contains(gated(t, ns, 4), "fe3") }, 20*time.Second, 20*time.Millisecond, "the switch gates fe3, rolling and not released")
	tenants.Update(t, ns, render("true"), "fe1")
	tenants.Update(t, ns, render(""), "fe2", "be")
	require.Eventually(t, func() bool { return len(gated(t, ns, 4)) == 4 }, 20*time.Second, 20*time.Millisecond, "the rest of the change is gated as it lands")
	broken.Set(ns, expressoperator.Breakage{})
	require.Eventually(t, func() bool {
		err := harness.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tenant.ClusterName + "-fe3"}, set)
		return err == nil && set.Status.ObservedGeneration == set.Generation && set.Status.CurrentReplicas == 0 &&
			set.Status.UpdateRevision != set.Status.CurrentRevision
	}, 20*time.Second, 20*time.Millisecond, "fe3's StatefulSet counts its old pod gone")
	let()
	require.Eventually(t, func() bool {
		return harness.Client.Get(ctx, client.ObjectKeyFromObject(old), &made) == nil && made.UID != oldUID
	}, 20*time.Second, 20*time.Millisecond, "the StatefulSet controller makes fe3's new pod")
	raced = made.Labels[v2alpha1.LabelExpressVersion] == v2
	if !raced {
		var now appsv1.StatefulSet
		require.NoError(t, harness.Client.Get(ctx, client.ObjectKeyFromObject(set), &now))
		t.Logf("fe3's pod was made of revision %s in %s; its StatefulSet's template is of %s, its status %+v",
			made.Labels[appsv1.ControllerRevisionHashLabelKey], ns, now.Spec.Template.Labels[v2alpha1.LabelExpressVersion], now.Status)
	}
	return ns, mark, made, raced
}
