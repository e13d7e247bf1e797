package cli

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/test/framework/mermaid"
)

// historyJSON is the part of kubectl express history -o json read here.
type historyJSON struct {
	Rollouts []struct {
		RolloutID string    `json:"rolloutID"`
		Began     time.Time `json:"began"`
		Ended     time.Time `json:"ended"`
		Nodes     []struct {
			Node       string    `json:"node"`
			Gated      time.Time `json:"gated"`
			Released   time.Time `json:"released"`
			Ready      time.Time `json:"ready"`
			After      []string  `json:"after"`
			Current    bool      `json:"current"`
			Reason     string    `json:"reason"`
			WaitingFor []string  `json:"waitingFor"`
		} `json:"nodes"`
		Events []struct {
			Node   string `json:"node"`
			Reason string `json:"reason"`
		} `json:"events"`
	} `json:"rollouts"`
}

// A tenant created, upgraded, and held in a third change by a paused fe2,
// on the real stack: history shows the three rollouts newest first, each
// node in the order its pods were bound by the scheduler (the pod log, not
// the sequencer's word), none released before the node before it was
// Ready; where the held change stands; the sequencer's Events; and a Gantt
// chart Mermaid's parser accepts.
func TestHistoryShowsATenantsRolloutsInTheOrderTheyRolled(t *testing.T) {
	h := full.Get(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "history-"}}
	require.NoError(t, h.Client.Create(ctx, ns))
	bound := func(from int) string {
		var order []string
		for _, n := range startsIn(fullPods, ns.Name)[from:] {
			if len(order) == 0 || order[len(order)-1] != n {
				order = append(order, n)
			}
		}
		return strings.Join(order, " ")
	}
	applyFile(t, h.Client, ns.Name, render(t, "create", map[string]any{"namespace": ns.Name}))
	settled(t, h.Client, ns.Name)
	created := bound(0)
	mark := len(startsIn(fullPods, ns.Name))
	applyFile(t, h.Client, ns.Name, render(t, "upgrade", map[string]any{"namespace": ns.Name, "expressVersion": v154}))
	settled(t, h.Client, ns.Name)
	upgraded := bound(mark)
	mark = len(startsIn(fullPods, ns.Name))

	fe2 := &v2alpha1.Frontend{}
	require.NoError(t, h.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "acme-fe2"}, fe2))
	require.NoError(t, h.Client.Patch(ctx, fe2, client.RawPatch("application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+v2alpha1.AnnotationPauseRollout+`":"true"}}}`))))
	applyFile(t, h.Client, ns.Name, render(t, "held", map[string]any{"namespace": ns.Name,
		"expressVersion": map[string]any{"Backend": "express-e689.155", "Frontend": "express-e689.155"}}))
	require.Eventually(t, func() bool {
		fe1 := &v2alpha1.Frontend{}
		if bound(mark) != "acme-fe1" || h.Client.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "acme-fe1"}, fe1) != nil {
			return false
		}
		c := meta.FindStatusCondition(fe1.Status.Conditions, v2alpha1.ConditionPrerequisitesReady)
		released, err := strconv.ParseInt(fe1.GetAnnotations()[v2alpha1.AnnotationReleasedGeneration], 10, 64)
		return c != nil && c.Reason == v2alpha1.ReasonRolloutComplete && err == nil && c.ObservedGeneration >= released
	}, 60*time.Second, 50*time.Millisecond, "fe1 rolls the held change and is recorded Ready on it")
	require.Equal(t, "acme-fe1", bound(mark), "the paused fe2 holds the rest")

	kubeconfig, err := h.KubeconfigFile(t.TempDir())
	require.NoError(t, err)
	out, errOut, err := express(t, "history", "acme", "-n", ns.Name, "--kubeconfig", kubeconfig, "-o", "json")
	require.NoError(t, err, errOut)
	var got historyJSON
	require.NoError(t, json.Unmarshal([]byte(out), &got), out)
	require.Len(t, got.Rollouts, 3, out)
	for i, want := range []string{"acme-fe1 acme-fe2 acme-be acme-fe3 acme-fe4", upgraded, created} {
		r := got.Rollouts[i]
		var order []string
		for j, n := range r.Nodes {
			order = append(order, n.Node)
			if j > 0 && !n.Released.IsZero() {
				assert.False(t, n.Released.Before(r.Nodes[j-1].Ready), "rollout %d: %s released before %s was Ready", i, n.Node, r.Nodes[j-1].Node)
			}
		}
		assert.Equal(t, want, strings.Join(order, " "), "rollout %d, newest first: the order its pods were bound", i)
		assert.NotEmpty(t, r.RolloutID, "the chart's rollout-id")
		if i > 0 {
			assert.False(t, r.Ended.IsZero(), "rollout %d ended", i)
			assert.False(t, got.Rollouts[i-1].Began.Before(r.Ended), "rollout %d began after rollout %d ended", i-1, i)
		}
	}
	held := got.Rollouts[0]
	assert.True(t, held.Ended.IsZero(), "the held change goes on")
	assert.Equal(t, v2alpha1.ReasonRolloutPaused, held.Nodes[1].Reason, "fe2 is paused")
	assert.True(t, held.Nodes[1].Released.IsZero())
	assert.Equal(t, []string{"acme-fe2"}, held.Nodes[2].WaitingFor, "be waits for fe2")
	assert.Contains(t, got.Rollouts[1].Nodes[1].After, "acme-fe1", "fe2's upgrade relied on fe1's converged rollout")
	assert.True(t, slices.ContainsFunc(held.Events, func(e struct {
		Node   string `json:"node"`
		Reason string `json:"reason"`
	}) bool {
		return e.Node == "acme-fe1" && e.Reason == v2alpha1.ReasonReleased
	}), "the sequencer's Event of fe1's release: %+v", held.Events)

	text, _, err := express(t, "history", "acme", "-n", ns.Name, "--kubeconfig", kubeconfig, "--last", "2")
	require.NoError(t, err)
	t.Logf("kubectl express history:\n%s", text)
	assert.Len(t, regexp.MustCompile(`(?m)^ROLLOUT `).FindAllString(text, -1), 2, "--last 2 shows two rollouts")
	assert.Regexp(t, `acme-fe2 +\d\d:\d\d:\d\d +- +- +\S+ +- +- +RolloutPaused`, text)
	gantt, _, err := express(t, "history", "acme", "-n", ns.Name, "--kubeconfig", kubeconfig, "-o", "mermaid", "--rollout", "2")
	require.NoError(t, err)
	t.Logf("kubectl express history -o mermaid --rollout 2:\n%s", gantt)
	assert.Equal(t, 5, strings.Count(gantt, "    rolled :"), "every node of the upgrade rolled:\n%s", gantt)
	_, err = mermaid.CheckText(t.TempDir(), gantt)
	assert.NoError(t, err, gantt)

	_, _, err = express(t, "history", "acme", "-n", ns.Name, "--kubeconfig", kubeconfig, "--rollout", "9")
	assert.ErrorContains(t, err, "--rollout 9: acme in "+ns.Name+" has 3 rollouts recorded")
	_, _, err = express(t, "history", "acme", "-n", ns.Name, "--kubeconfig", kubeconfig, "-o", "wide")
	assert.ErrorContains(t, err, `-o "wide": want json, yaml or mermaid`)
	_, _, err = express(t, "history", "zeta", "-n", ns.Name, "--kubeconfig", kubeconfig)
	assert.ErrorContains(t, err, `no tenant "zeta"`)
}
