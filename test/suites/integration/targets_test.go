package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/test/framework/tenantchart"
)

// Target changes of every kind, on a real API server with the webhooks
// over TLS, on Kubernetes' own control loops (DESIGN v2 §2, §4).

func TestAChangeToAFieldOnlyTheExpressCRDKnowsRollsInTheUpgradeOrder(t *testing.T) {
	startSequencer(t)
	ns, mark := settledTenant(t, 5)
	patch := `{"spec":{"resources":{"replicas":3,"requests":{"cpu":"500m"}},"extensions":{"jvm":{"flags":["-Xmx4g"],"ratio":0.75}}}}`
	for _, k := range keys(5) {
		require.NoError(t, harness.Client.Patch(context.Background(), node(ns, k), client.RawPatch(types.MergePatchType, []byte(patch))))
	}
	waitSettled(t, ns, 5)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", startedSince(ns, mark))
	assertEachStartedAfterThePreviousWasReady(t, ns, mark)

	u := &unstructured.Unstructured{}
	u.SetAPIVersion(v2alpha1.GroupVersion.String())
	u.SetKind(v2alpha1.KindBackend)
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "acme-be"}, u))
	flags, _, _ := unstructured.NestedStringSlice(u.Object, "spec", controlplane.PreservedField, "jvm", "flags")
	ratio, _, _ := unstructured.NestedFloat64(u.Object, "spec", controlplane.PreservedField, "jvm", "ratio")
	cpu, _, _ := unstructured.NestedString(u.Object, "spec", controlplane.UnmodelledField, "requests", "cpu")
	assert.Equal(t, []string{"-Xmx4g"}, flags, "the unmodelled subtree survives admission and the gate patches")
	assert.InDelta(t, 0.75, ratio, 0)
	assert.Equal(t, "500m", cpu)
}

func TestFe3ToggledDownAndUpMidChangeKeepsItsTurnAndIsNeverGatedByTheSequencer(t *testing.T) {
	startSequencer(t)
	ns, mark := settledTenant(t, 5)
	setVersion(t, ns, v2, keys(5)...)
	require.True(t, waitFor(10*time.Second, func() bool { return startedSince(ns, mark) != "" }))
	setUp(t, ns, false, "fe3")
	setUp(t, ns, true, "fe3")
	waitSettled(t, ns, 5)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", startedSince(ns, mark))
	var events eventsv1.EventList
	require.NoError(t, harness.Client.List(context.Background(), &events, client.InNamespace(ns)))
	for _, e := range events.Items {
		assert.NotEqual(t, "Gate", e.Action, "the sequencer never gates a node: %s %s", e.Regarding.Name, e.Note)
	}
}

func TestANodeDeletedWhileTheBackendWaitsForItLeavesTheOrder(t *testing.T) {
	startSequencer(t)
	ns, mark := settledTenant(t, 5)
	stick(ns, "fe2")
	setVersion(t, ns, v2, keys(5)...)
	require.True(t, waitFor(20*time.Second, func() bool { return startedSince(ns, mark) == "fe1 fe2" }))
	be := node(ns, "be")
	require.NoError(t, harness.Client.Get(context.Background(), client.ObjectKeyFromObject(be), be))
	require.True(t, v2alpha1.IsGated(be), "be waits for the stuck fe2")
	require.NoError(t, harness.Client.Delete(context.Background(), node(ns, "fe2")))
	waitSettled(t, ns, 4)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", startedSince(ns, mark))
}

// The tenant chart applied node by node, 30 s apart — an Argo CD retry, a
// slow sync — with the default flags: rollout-id holds the change until all
// of it landed, and it is ordered as one.
func TestTheTenantChartAppliedNodeByNodeWithLongGapsIsOrderedAsOne(t *testing.T) {
	if testing.Short() {
		t.Skip("applies five nodes 30 s apart")
	}
	startSequencer(t, func(o *app.Options) { o.Grouping = app.DefaultOptions().Grouping })
	ns := namespace(t)
	_, nodes, err := tenantchart.Render(map[string]any{"namespace": ns})
	require.NoError(t, err)
	for _, n := range nodes {
		require.NoError(t, harness.Client.Create(context.Background(), n))
	}
	waitSettled(t, ns, 5)
	mark := len(startedIn(ns))
	_, next, err := tenantchart.Render(map[string]any{"namespace": ns, "expressVersion": map[string]any{"Backend": v2, "Frontend": v2}})
	require.NoError(t, err)
	byKey := map[string]v2alpha1.Node{}
	for _, n := range next {
		byKey[strings.TrimPrefix(n.GetName(), "acme-")] = n
	}
	for i, k := range keys(5) {
		if i > 0 {
			time.Sleep(30 * time.Second)
			assert.Equal(t, "", startedSince(ns, mark), "nothing rolls while the change is landing")
		}
		update(t, ns, func(n v2alpha1.Node) {
			*n.NodeSpec() = *byKey[k].NodeSpec()
			n.GetAnnotations()[v2alpha1.AnnotationRolloutID] = byKey[k].GetAnnotations()[v2alpha1.AnnotationRolloutID]
		}, k)
	}
	waitSettled(t, ns, 5)
	assert.Equal(t, "fe1 fe2 be fe3 fe4", startedSince(ns, mark))
}

// The tenant chart reversing fe1 and fe2 in one helm upgrade: the first apply
// closes a cycle with fe2's list as it still is (a warning), the next one
// opens it again; rollout-id keeps the sequencer from acting on it.
func TestTheTenantChartReversingTwoExplicitListsGoesThroughWithNoCycleActedOn(t *testing.T) {
	startSequencer(t)
	ns := namespace(t)
	prereq := func(node string) []any {
		return []any{map[string]any{"expressNode": node, "kind": "Frontend", "podConditionType": "Ready", "conditionStatus": "True"}}
	}
	values := func(version string, fe1, fe2 []any) map[string]any {
		return map[string]any{"namespace": ns, "expressVersion": map[string]any{"Backend": version, "Frontend": version},
			"nodes": map[string]any{"be": map[string]any{}, "fe1": map[string]any{"upgradePrerequisites": fe1},
				"fe2": map[string]any{"upgradePrerequisites": fe2}, "fe3": map[string]any{}, "fe4": map[string]any{}}}
	}
	_, nodes, err := tenantchart.Render(values(v1, []any{}, prereq("acme-fe1")))
	require.NoError(t, err)
	for _, n := range nodes {
		require.NoError(t, harness.Client.Create(context.Background(), n))
	}
	waitSettled(t, ns, 5)
	mark := len(startedIn(ns))

	_, next, err := tenantchart.Render(values(v2, prereq("acme-fe2"), []any{}))
	require.NoError(t, err)
	for _, n := range next { // one node after the other, as helm upgrade does
		k := strings.TrimPrefix(n.GetName(), "acme-")
		update(t, ns, func(live v2alpha1.Node) {
			*live.NodeSpec() = *n.NodeSpec()
			live.GetAnnotations()[v2alpha1.AnnotationRolloutID] = n.GetAnnotations()[v2alpha1.AnnotationRolloutID]
		}, k)
	}
	waitSettled(t, ns, 5)
	assert.Equal(t, "fe2 fe1 be fe3 fe4", startedSince(ns, mark))
	var events eventsv1.EventList
	require.NoError(t, harness.Client.List(context.Background(), &events, client.InNamespace(ns)))
	for _, e := range events.Items {
		assert.NotEqual(t, v2alpha1.ReasonDependencyCycle, e.Reason, "no cycle is acted on: %s %s", e.Regarding.Name, e.Note)
	}
}

// A tenant without rollout-id whose fe4 is rewritten every 100 ms, within
// the suite's settle time (300 ms): the settle time alone would hold it
// forever; the cap (5 s) releases the backend change. On a loaded machine a
// rewrite may come later than the settle time after the one before: the
// change may go then, and no earlier.
func TestANodeRewrittenWithinTheSettleTimeHoldsABackendChangeNoLongerThanTheCap(t *testing.T) {
	startSequencer(t)
	ns, mark := settledTenant(t, 5)
	setVersion(t, ns, v2, "be")
	changed := time.Now()
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	var mu sync.Mutex
	// When each write was stored: after its call began, before it returned.
	type span struct{ from, to time.Time }
	written := []span{{changed, changed}}
	go func() {
		for i := 0; ctx.Err() == nil; i++ {
			n := node(ns, "fe4")
			if harness.Client.Get(ctx, client.ObjectKeyFromObject(n), n) == nil {
				n.NodeSpec().ConfigChangeset = fmt.Sprintf("churn-%d", i)
				from := time.Now()
				if harness.Client.Update(ctx, n) == nil {
					mu.Lock()
					written = append(written, span{from, time.Now()})
					mu.Unlock()
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	require.True(t, waitFor(30*time.Second, func() bool { return strings.Contains(startedSince(ns, mark), "be") }),
		"the backend change was starved: %s", startedSince(ns, mark))
	held := time.Since(changed)
	stop()
	mu.Lock()
	defer mu.Unlock()
	// The earliest the change may go: the first settle time the tenant may
	// have been quiet for, or the cap, whichever came first.
	earliest := grouping.SettleCap
	for i := 1; i < len(written) && written[i-1].from.Sub(changed) < held; i++ {
		if gap := written[i].to.Sub(written[i-1].from); gap > grouping.SettleTime {
			earliest = min(earliest, written[i-1].from.Sub(changed)+grouping.SettleTime)
			t.Logf("a rewrite may have come %s after the one before: the tenant may have been quiet for the settle time %s after the change", gap.Round(time.Millisecond), written[i-1].from.Sub(changed).Round(time.Millisecond))
			break
		}
	}
	assert.GreaterOrEqual(t, held, earliest-time.Second, "held while the tenant kept changing")
	assert.Less(t, held, grouping.SettleCap+5*time.Second, "released within the cap, not after the churn")
}
