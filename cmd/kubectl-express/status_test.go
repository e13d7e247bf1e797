package main

import (
	"context"
	"encoding/json"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/golden"
)

// The view's layout at a fixed moment: a tenant in each state, the bars in
// ASCII (not a terminal) and in block characters (a terminal), wide and
// JSON.
func TestTheFleetViewIsLaidOutAsItsGoldens(t *testing.T) {
	now := time.Date(2026, 11, 25, 3, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) *time.Time { at := now.Add(-d); return &at }
	f := fleet{
		Summary: fleetSummary{Tenants: 4, Stuck: 1, Held: 1, Rolling: 1, Done: 1, NodesOnTarget: 17, LiveNodes: 27, OutOfOrder: 1, WouldHaveHeld: 1},
		Tenants: []tenantStatus{
			{Namespace: "tenant-2", Tenant: "beta", State: "stuck", LiveNodes: 5, NodesOnTarget: 4, Since: ago(3 * time.Hour),
				Next: &nextNode{Node: "beta-fe1", Reason: v2alpha1.ReasonPrerequisiteNotFound, Message: "waiting for beta-fe9 (Frontend): it does not exist", WaitingFor: []string{"beta-fe9"}}},
			{Namespace: "tenant-3", Tenant: "gamma", State: "held", LiveNodes: 8, NodesOnTarget: 0, Since: ago(90 * time.Second),
				Next: &nextNode{Node: "gamma-fe1", Reason: v2alpha1.ReasonRolloutPaused, Message: "held by its express.medallia.com/pause-rollout annotation"}},
			{Namespace: "tenant-1", Tenant: "acme", State: "rolling", LiveNodes: 8, NodesOnTarget: 3, Rolling: []string{"acme-be"}, Since: ago(40 * time.Second), OutOfOrder: 1,
				Next: &nextNode{Node: "acme-fe3", Reason: v2alpha1.ReasonWaitingForPrerequisite, Message: "waiting for acme-be (Backend) to be Ready", WaitingFor: []string{"acme-be"}}},
			{Namespace: "tenant-4", Tenant: "delta", State: "done", LiveNodes: 6, NodesOnTarget: 6, Since: ago(26 * time.Hour), WouldHaveHeld: 1},
		},
	}
	for name, c := range map[string]struct {
		output string
		tty    bool
	}{"table": {"", false}, "tty": {"", true}, "wide": {"wide", false}, "json": {"json", false}} {
		t.Run(name, func(t *testing.T) {
			out, err := renderFleet(f, c.output, true, c.tty, now)
			require.NoError(t, err)
			golden.Assert(t, "status."+name, out)
		})
	}
}

// statusFixtures adds, beside the tenant of upgradeInProgress (rolling), a
// tenant in each other state, each in a namespace of its own: done (every
// node released and Ready on target), held (its first frontend paused) and
// stuck (a frontend whose prerequisite does not exist).
func statusFixtures(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	c := shared.Get(t).Client
	var existing corev1.Namespace
	if c.Get(ctx, client.ObjectKey{Name: "status-done"}, &existing) == nil {
		return // made by an earlier test of this run
	}
	tenantOf := func(namespace string, keys []string, edit func(key string, n v2alpha1.Node)) map[string]v2alpha1.Node {
		require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))
		nodes := map[string]v2alpha1.Node{}
		for _, key := range keys {
			kind := v2alpha1.KindFrontend
			if key == "be" {
				kind = v2alpha1.KindBackend
			}
			n := v2alpha1.NewNode(kind)
			n.SetName("t-" + key)
			n.SetNamespace(namespace)
			n.SetLabels(map[string]string{"team": namespace})
			*n.NodeSpec() = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "t"}, ExpressVersion: "express-e689.151"}
			edit(key, n)
			require.NoError(t, c.Create(ctx, n))
			nodes[key] = n
		}
		return nodes
	}
	tenant := func(namespace string, edit func(key string, n v2alpha1.Node)) map[string]v2alpha1.Node {
		return tenantOf(namespace, []string{"be", "fe1"}, edit)
	}
	releasedAndReady := func(n v2alpha1.Node) {
		require.NoError(t, releaseRecorded(ctx, c, n))
		require.NoError(t, runningPod(ctx, c, n, n.GetName()+"-0", corev1.ConditionTrue))
	}
	done := tenant("status-done", func(string, v2alpha1.Node) {})
	releasedAndReady(done["be"])
	releasedAndReady(done["fe1"])
	held := tenant("status-held", func(key string, n v2alpha1.Node) {
		if key == "fe1" {
			n.SetAnnotations(map[string]string{v2alpha1.AnnotationPauseRollout: "true"})
		}
	})
	releasedAndReady(held["be"])
	stuck := tenant("status-stuck", func(key string, n v2alpha1.Node) {
		if key == "fe1" {
			n.NodeSpec().DeploymentDependencies = &v2alpha1.DeploymentDependencies{
				ProvisioningPrerequisites: []v2alpha1.Prerequisite{{ExpressNode: "t-fe9", Kind: v2alpha1.KindFrontend}}}
		}
	})
	releasedAndReady(stuck["be"])

	// Two Backends alone, released, each with a pod whose status says
	// Ready: one on a machine that is there and Ready, one on a machine
	// that is gone (its pod not yet deleted).
	up := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "status-machine-up"}}
	require.NoError(t, c.Create(ctx, up))
	up.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	require.NoError(t, c.Status().Update(ctx, up))
	for namespace, machine := range map[string]string{"status-on-machine": "status-machine-up", "status-machine-lost": "status-machine-gone"} {
		be := tenantOf(namespace, []string{"be"}, func(string, v2alpha1.Node) {})["be"]
		require.NoError(t, releaseRecorded(ctx, c, be))
		require.NoError(t, runningPodOn(ctx, c, be, be.GetName()+"-0", machine, corev1.ConditionTrue))
	}
}

// status -A on tenants in every state, read from a real API server (other
// tests' tenants beside them): each tenant's state, progress and next node,
// stuck first, and a summary that adds them up.
func TestStatusShowsEveryTenantOfTheFleet(t *testing.T) {
	kubeconfig := cluster(t)
	statusFixtures(t)
	out, _, err := run(t, "", "status", "-A", "--kubeconfig", kubeconfig, "-o", "json")
	require.NoError(t, err)
	var f fleet
	require.NoError(t, json.Unmarshal([]byte(out), &f), out)
	byNamespace := map[string]tenantStatus{}
	sum := fleetSummary{}
	rank := -1
	for _, s := range f.Tenants {
		byNamespace[s.Namespace] = s
		r := slices.Index([]string{"stuck", "held", "rolling", "done"}, s.State)
		assert.GreaterOrEqual(t, r, rank, "stuck tenants first, then held, rolling, done: %s/%s", s.Namespace, s.Tenant)
		rank = r
		sum.Tenants++
		sum.NodesOnTarget += s.NodesOnTarget
		sum.LiveNodes += s.LiveNodes
		switch s.State {
		case "stuck":
			sum.Stuck++
		case "held":
			sum.Held++
		case "rolling":
			sum.Rolling++
		case "done":
			sum.Done++
		}
	}
	assert.Equal(t, sum, f.Summary, "the summary adds up the tenants")

	for namespace, want := range map[string]struct {
		state              string
		live, onTarget     int
		next, reason, wait string
	}{
		"status-stuck": {"stuck", 2, 1, "t-fe1", v2alpha1.ReasonPrerequisiteNotFound, "t-fe9"},
		"status-held":  {"held", 2, 1, "t-fe1", v2alpha1.ReasonRolloutPaused, ""},
		ns:             {"rolling", 4, 0, "acme-be", v2alpha1.ReasonWaitingForPrerequisite, "acme-fe1"}, // upgrade order fe1, fe2 (down), be
		"status-done":  {"done", 2, 2, "", "", ""},
		// Read with one LIST of the cluster's machines.
		"status-on-machine":   {"done", 1, 1, "", "", ""},
		"status-machine-lost": {"rolling", 1, 0, "", "", ""},
	} {
		s, ok := byNamespace[namespace]
		if !assert.True(t, ok, "tenant of %s listed: %s", namespace, out) {
			continue
		}
		assert.Equal(t, want.state, s.State, namespace)
		assert.Equal(t, want.live, s.LiveNodes, namespace)
		assert.Equal(t, want.onTarget, s.NodesOnTarget, namespace)
		if want.next == "" {
			assert.Nil(t, s.Next, namespace)
			continue
		}
		if assert.NotNil(t, s.Next, namespace) {
			assert.Equal(t, want.next, s.Next.Node, namespace)
			assert.Equal(t, want.reason, s.Next.Reason, namespace)
			if want.wait != "" {
				assert.Contains(t, s.Next.WaitingFor, want.wait, namespace)
			}
		}
	}
	assert.Equal(t, []string{"acme-fe1"}, byNamespace[ns].Rolling, "fe1 released and rolling")
	for _, namespace := range []string{"status-on-machine", "status-machine-lost"} {
		out, _, err := run(t, "", "status", "-n", namespace, "--kubeconfig", kubeconfig, "-o", "json")
		require.NoError(t, err)
		var one fleet
		require.NoError(t, json.Unmarshal([]byte(out), &one), out)
		if assert.Len(t, one.Tenants, 1, namespace) {
			assert.Equal(t, byNamespace[namespace], one.Tenants[0], "a namespace's view, reading its machines by name, says what -A says")
		}
	}

	out, _, err = run(t, "", "status", "-A", "--kubeconfig", kubeconfig)
	require.NoError(t, err)
	t.Logf("kubectl express status -A:\n%s", out)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	assert.Equal(t, []string{"NAMESPACE", "TENANT", "PROGRESS", "STATE", "ROLLING", "NEXT", "REASON", "BLOCKER", "AGE", "ORDER"}, strings.Fields(lines[0]))
	assert.Contains(t, lines[1], "stuck", "stuck tenants first")
	assert.Regexp(t, `status-done +t +\[##########\] 2/2 +done`, out, "the done tenant's bar, in ASCII off a terminal")
	assert.Regexp(t, `^\d+ tenants: \d+ stuck, \d+ held, \d+ rolling, \d+ done\. Nodes on target \[[#.]{10}\] \d+/\d+ \(\d+%\)\. Out of order: 0 nodes\.$`, lines[len(lines)-1])
}

// -n, --stuck and -l narrow the view.
func TestStatusNarrowsToANamespaceStuckTenantsOrASelector(t *testing.T) {
	kubeconfig := cluster(t)
	statusFixtures(t)
	tenants := func(args ...string) []string {
		t.Helper()
		out, _, err := run(t, "", append([]string{"status", "--kubeconfig", kubeconfig, "-o", "json"}, args...)...)
		require.NoError(t, err)
		var f fleet
		require.NoError(t, json.Unmarshal([]byte(out), &f))
		var names []string
		for _, s := range f.Tenants {
			names = append(names, s.Namespace+"/"+s.Tenant)
		}
		return names
	}
	assert.Equal(t, []string{"status-held/t"}, tenants("-n", "status-held"))
	assert.Equal(t, []string{"status-stuck/t"}, tenants("-A", "--stuck"))
	assert.Equal(t, []string{"status-done/t"}, tenants("-A", "-l", "team=status-done"))
	_, _, err := run(t, "", "status", "-w", "--kubeconfig", kubeconfig, "-n", "status-done", "--as", "someone-without-rights")
	assert.ErrorContains(t, err, "listing Backends in namespace status-done", "-w says what this user may not read, and does not wait for it")
	assert.ErrorContains(t, err, "forbidden")
	out, _, err := run(t, "", "status", "--kubeconfig", kubeconfig, "-n", "no-such-namespace")
	require.NoError(t, err)
	assert.Contains(t, out, "No tenants.")
	_, _, err = run(t, "", "status", "--kubeconfig", kubeconfig, "-o", "mermaid")
	assert.ErrorContains(t, err, `-o "mermaid": want wide, json or yaml`)
	_, _, err = run(t, "", "status", "--kubeconfig", kubeconfig, "-l", "a in (b")
	assert.ErrorContains(t, err, `-l "a in (b"`)
}

// status -w draws the view again from its informers when something it
// reads changes: here the machine a Backend's Ready pod runs on is deleted,
// and the tenant done a moment ago is shown rolling, its pod no longer
// counted Ready. In one namespace and across the cluster.
func TestStatusWatchDrawsAChangeFromItsInformers(t *testing.T) {
	kubeconfig := cluster(t)
	ctx := context.Background()
	c := shared.Get(t).Client
	for name, all := range map[string]bool{"n": false, "a": true} {
		t.Run(name, func(t *testing.T) {
			namespace, machine := "status-watch-"+name, "status-watch-machine-"+name
			require.NoError(t, c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}))
			m := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: machine}}
			require.NoError(t, c.Create(ctx, m))
			m.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
			require.NoError(t, c.Status().Update(ctx, m))
			be := v2alpha1.NewNode(v2alpha1.KindBackend)
			be.SetName("t-be")
			be.SetNamespace(namespace)
			*be.NodeSpec() = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "t"}, ExpressVersion: "express-e689.151"}
			require.NoError(t, c.Create(ctx, be))
			require.NoError(t, releaseRecorded(ctx, c, be))
			require.NoError(t, runningPodOn(ctx, c, be, "t-be-0", machine, corev1.ConditionTrue))

			args := []string{"status", "-w", "--kubeconfig", kubeconfig, "-n", namespace}
			row := `(?m)^t +`
			if all {
				args = []string{"status", "-w", "--kubeconfig", kubeconfig, "-A"}
				row = `(?m)^` + namespace + ` +t +`
			}
			out, stop := watching(t, args...)
			require.Eventually(t, func() bool { return regexp.MustCompile(row + `\[#+\] 1/1 +done`).MatchString(out.String()) },
				10*time.Second, 20*time.Millisecond, "%s", out.String())

			// Past the redraw the informers' first adds ask for (a second
			// with -A), so that only the machine's deletion can draw the
			// view again.
			time.Sleep(2 * time.Second)
			require.NoError(t, c.Delete(ctx, m))
			require.Eventually(t, func() bool {
				s := out.String()
				i := strings.LastIndex(s, "\n--- ")
				return i >= 0 && regexp.MustCompile(row+`\[\.+\] 0/1 +rolling`).MatchString(s[i:])
			}, 10*time.Second, 20*time.Millisecond, "the tenant whose machine is gone is drawn again: %s", out.String())
			stop()
		})
	}
}
