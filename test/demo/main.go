// Command demo shows express-sequencer at work on a local control plane: a
// real kube-apiserver and etcd, Kubernetes' own control loops
// (kube-controller-manager's StatefulSet controller and garbage collector,
// kube-scheduler, and KWOK as the kubelet of two fake Nodes),
// express-sequencer's webhooks (over TLS, with the self-signed CA it
// injects) and sequencer, and the Express operator's part: one StatefulSet
// per node. It creates the tenant of the user's chart, upgrades all of it,
// changes its config, deletes every pod at once, then upgrades its
// frontends with fe2 down, printing a timeline of what is gated, released
// and Ready, and why, and of the StatefulSets' pods as they move
// (SchedulingGated, scheduled, Ready, Terminating). It exits 0 only if
// every order observed is the expected one.
//
//	make demo                 # or, in test/: go run ./demo
//	make demo DEMO_FLAGS=-keep # keep the control plane up afterwards
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
	"github.com/medallia/express-sequencer/test/framework/tenantchart"
)

type options struct {
	keep       bool
	startAfter time.Duration
	readyAfter time.Duration
	settle     time.Duration
	timeout    time.Duration
}

func main() {
	o := options{}
	flag.BoolVar(&o.keep, "keep", false, "Keep the control plane running after the demo and print how to reach it with kubectl; Ctrl-C ends it.")
	flag.DurationVar(&o.startAfter, "start-after", 300*time.Millisecond, "How long KWOK takes to start a pod once it is scheduled.")
	flag.DurationVar(&o.readyAfter, "ready-after", 1200*time.Millisecond, "How long KWOK then takes to make the pod Ready.")
	flag.DurationVar(&o.settle, "settle-time", 2*time.Second, "express-sequencer's --settle-time.")
	flag.DurationVar(&o.timeout, "step-timeout", 2*time.Minute, "Give up on a step after this long.")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, o, os.Stdout)
	switch {
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(os.Stderr, "\nInterrupted; the control plane is stopped.")
		os.Exit(130)
	case err != nil:
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

// timeline prints what happens, stamped with the time since the start.
type timeline struct {
	mu    sync.Mutex
	out   io.Writer
	start time.Time
}

func (t *timeline) printf(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.out, "[%5.1fs] %s\n", time.Since(t.start).Seconds(), fmt.Sprintf(format, args...))
}

func (t *timeline) say(format string, args ...any) {
	t.mu.Lock()
	defer t.mu.Unlock()
	fmt.Fprintf(t.out, format+"\n", args...)
}

// step is one change to the tenant and the order it must roll in.
type step struct {
	title string
	want  string
	do    func(ctx context.Context, d *demo) error
}

type demo struct {
	*timeline
	c    client.Client
	pods *controlplane.PodLog
	ns   string
	// gated are the pods seen scheduling-gated, by UID.
	mu    sync.Mutex
	gated map[types.UID]bool
}

const (
	v151 = "express-e689.151"
	v154 = "express-e689.154"
	v155 = "express-e689.155"
	ns   = "tenant-123634-prod"
)

func run(ctx context.Context, o options, out io.Writer) (err error) {
	defer func() {
		if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %v", ctx.Err(), err) // interrupted: whatever failed, failed because of it
		}
	}()
	tl := &timeline{out: out, start: time.Now()}
	tl.say("express-sequencer demo: one Express tenant on a local kube-apiserver + etcd\n")
	tl.printf("Starting kube-apiserver and etcd, kube-controller-manager, kube-scheduler, KWOK with two fake Nodes, express-sequencer and the Express operator's part (a StatefulSet per node)…")
	h, err := controlplane.NewHarness(controlplane.TestLogger(), func(ao *app.Options) {
		ao.Grouping.SettleTime = o.settle
		ao.ProgressDeadline = time.Minute
	})
	if err != nil {
		return err
	}
	defer h.Stop()
	cluster, err := h.StartCluster(2)
	if err != nil {
		return err
	}
	defer cluster.Stop()
	d := &demo{timeline: tl, c: h.Client, ns: ns, gated: map[types.UID]bool{}}
	op := &expressoperator.Operator{StartAfter: o.startAfter, ReadyAfter: o.readyAfter}
	stopOp, err := h.StartController(op.SetupWithManager)
	if err != nil {
		return err
	}
	defer stopOp()
	podCtx, stopPods := context.WithCancel(ctx)
	defer stopPods()
	if d.pods, err = controlplane.WatchPods(podCtx, h.Config, d.podEvent); err != nil {
		return err
	}
	if err := h.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	tl.printf("Ready: webhooks served over TLS (self-signed CA injected), sequencer running; the tenant chart stamps %s on every node, so a change is released the instant all of it has landed", v2alpha1.AnnotationRolloutID)

	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	go d.watch(watchCtx)

	v154s := map[string]any{"Backend": v154, "Frontend": v154}
	newConfig := map[string]any{"Backend": "5c1e0b7d", "Frontend": "5c1e0b7d"}
	steps := []step{
		{"helm install: tenant acme from charts/express-tenant (no allNodeConfig), every node on " + v151,
			"be fe1 fe2 fe3 fe4", func(ctx context.Context, d *demo) error { return d.apply(ctx, nil) }},
		{"helm upgrade --set expressVersion.Backend=" + v154 + ",expressVersion.Frontend=" + v154, "fe1 fe2 be fe3 fe4",
			func(ctx context.Context, d *demo) error {
				return d.apply(ctx, map[string]any{"expressVersion": v154s})
			}},
		{"helm upgrade --set configChangeset.Backend=5c1e0b7d,configChangeset.Frontend=5c1e0b7d (config only, same version)", "fe1 fe2 be fe3 fe4",
			func(ctx context.Context, d *demo) error {
				return d.apply(ctx, map[string]any{"expressVersion": v154s, "configChangeset": newConfig})
			}},
		{"kubectl delete pods -l " + v2alpha1.LabelNode + ": every pod of the tenant deleted at once, recreated at once under the same names by the StatefulSets", "be fe1 fe2 fe3 fe4",
			func(ctx context.Context, d *demo) error {
				return d.c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(d.ns), client.HasLabels{v2alpha1.LabelNode})
			}},
		{"helm upgrade --set nodes.fe2.up=false,expressVersion.Frontend=" + v155, "fe1 fe3 fe4",
			func(ctx context.Context, d *demo) error {
				return d.apply(ctx, map[string]any{
					"expressVersion":  map[string]any{"Backend": v154, "Frontend": v155},
					"configChangeset": newConfig,
					"nodes":           map[string]any{"fe2": map[string]any{"up": false}},
				})
			}},
	}
	type outcome struct{ title, want, got string }
	var outcomes []outcome
	for i, s := range steps {
		tl.say("\nStep %d/%d: %s\n  expected order: %s", i+1, len(steps), s.title, s.want)
		mark := time.Now()
		if err := s.do(ctx, d); err != nil {
			return err
		}
		if err := d.waitSettled(ctx, o.timeout); err != nil {
			return err
		}
		got := d.startedSince(mark)
		outcomes = append(outcomes, outcome{s.title, s.want, got})
		tl.printf("step %d done: observed order %s", i+1, got)
	}

	tl.say("\nSummary")
	ok := true
	for i, oc := range outcomes {
		verdict := "as expected"
		if oc.got != oc.want {
			verdict, ok = "EXPECTED "+oc.want, false
		}
		tl.say("  %d. %-22s %s", i+1, oc.got, verdict)
	}
	if !ok {
		return errors.New("an observed order differs from the expected one")
	}
	tl.say("Every order was the expected one.")
	// The order auditor judged the same rollouts from the API server's
	// order alone, without the planner: it must agree.
	if err := auditmetrics.NoViolations(ctx, d.c, time.Minute); err != nil {
		return err
	}
	tl.say("The order auditor, judging the same rollouts without the planner, counted no violation.")
	if o.keep {
		return d.keep(ctx, h)
	}
	return nil
}

// progress says how many up nodes are Ready on their current target: every
// pod Ready and carrying the node's target hash.
func (d *demo) progress() string {
	nodes, err := controlplane.Nodes(context.Background(), d.c, d.ns)
	if err != nil {
		return ""
	}
	up, on := 0, 0
	for _, n := range nodes {
		if !n.NodeSpec().IsUp() {
			continue
		}
		up++
		var pods corev1.PodList
		if d.c.List(context.Background(), &pods, client.InNamespace(d.ns), client.MatchingLabels{v2alpha1.LabelNode: n.GetName()}) != nil || len(pods.Items) == 0 {
			continue
		}
		if !slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool {
			return p.DeletionTimestamp != nil || p.Labels[v2alpha1.LabelTargetHash] != n.GetAnnotations()[v2alpha1.AnnotationTargetHash] ||
				!slices.ContainsFunc(p.Status.Conditions, func(c corev1.PodCondition) bool { return c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue })
		}) {
			on++
		}
	}
	return fmt.Sprintf("[%d/%d nodes Ready on target]", on, up)
}

// startedSince returns the nodes whose pods were scheduled since mark, in
// the order their first pod was.
func (d *demo) startedSince(mark time.Time) string {
	var out []string
	for _, n := range d.pods.Starts(d.ns, mark) {
		out = append(out, strings.TrimPrefix(n, "acme-"))
	}
	return strings.Join(out, " ")
}

// podEvent prints a step of a pod's life as Kubernetes ran it.
func (d *demo) podEvent(e controlplane.PodEvent) {
	if e.Namespace != d.ns {
		return
	}
	d.mu.Lock()
	wasGated := d.gated[e.UID]
	d.mu.Unlock()
	switch {
	case e.Terminating:
		d.printf("%-9s pod %s Terminating", e.Node, e.Pod)
	case e.Ready:
		d.printf("%-9s pod %s Ready  %s", e.Node, e.Pod, d.progress())
	case wasGated:
		d.printf("%-9s pod %s scheduling gate removed: scheduled on %s", e.Node, e.Pod, e.Machine)
	default:
		d.printf("%-9s pod %s scheduled on %s (target %s)", e.Node, e.Pod, e.Machine, e.Hash)
	}
}

// watch prints every change of a node's gate and PrerequisitesReady condition.
func (d *demo) watch(ctx context.Context) {
	last := map[string]string{}
	for ctx.Err() == nil {
		nodes, err := controlplane.Nodes(ctx, d.c, d.ns)
		if err == nil {
			slices.SortFunc(nodes, func(a, b v2alpha1.Node) int { return strings.Compare(a.GetName(), b.GetName()) })
			for _, n := range nodes {
				c := meta.FindStatusCondition(n.NodeStatus().Conditions, v2alpha1.ConditionPrerequisitesReady)
				state := "gated    "
				if !v2alpha1.IsGated(n) {
					state = "ungated  "
				}
				line := state
				if c != nil {
					line += fmt.Sprintf(" %-22s %s", c.Reason, c.Message)
				}
				if last[n.GetName()] != line {
					last[n.GetName()] = line
					d.printf("%-9s %s", n.GetName(), line)
				}
			}
		}
		var pods corev1.PodList
		if d.c.List(ctx, &pods, client.InNamespace(d.ns)) == nil {
			for _, p := range pods.Items {
				d.mu.Lock()
				seen := d.gated[p.UID]
				if len(p.Spec.SchedulingGates) > 0 {
					d.gated[p.UID] = true
				}
				d.mu.Unlock()
				if len(p.Spec.SchedulingGates) > 0 && !seen {
					d.printf("%-9s pod %s SchedulingGated (%s)", p.Labels[v2alpha1.LabelNode], p.Name, p.Spec.SchedulingGates[0].Name)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// apply renders the tenant chart with Helm's Go SDK and applies the result
// the way `helm upgrade` does: nodes it renders are created or have their
// labels and spec replaced (so the webhook re-injects the defaults the chart
// leaves out, and keeps the sequencer's gate).
func (d *demo) apply(ctx context.Context, values map[string]any) error {
	if values == nil {
		values = map[string]any{}
	}
	values["namespace"] = d.ns
	_, nodes, err := tenantchart.Render(values)
	if err != nil {
		return err
	}
	for _, rendered := range nodes {
		live := v2alpha1.NewNode(rendered.NodeKind())
		err := d.c.Get(ctx, client.ObjectKeyFromObject(rendered), live)
		switch {
		case apierrors.IsNotFound(err):
			if err := d.c.Create(ctx, rendered); err != nil {
				return fmt.Errorf("creating %s: %w", rendered.GetName(), err)
			}
			continue
		case err != nil:
			return err
		}
		key := strings.TrimPrefix(rendered.GetName(), "acme-")
		if err := d.update(ctx, key, func(n v2alpha1.Node) {
			n.SetLabels(rendered.GetLabels())
			ann := n.GetAnnotations()
			ann[v2alpha1.AnnotationRolloutID] = rendered.GetAnnotations()[v2alpha1.AnnotationRolloutID]
			n.SetAnnotations(ann)
			*n.NodeSpec() = *rendered.NodeSpec()
		}); err != nil {
			return fmt.Errorf("updating %s: %w", rendered.GetName(), err)
		}
	}
	return nil
}

func (d *demo) update(ctx context.Context, key string, edit func(v2alpha1.Node)) error {
	for {
		kind := v2alpha1.KindFrontend
		if key == "be" {
			kind = v2alpha1.KindBackend
		}
		n := v2alpha1.NewNode(kind)
		if err := d.c.Get(ctx, client.ObjectKey{Namespace: d.ns, Name: "acme-" + key}, n); err != nil {
			return err
		}
		edit(n)
		err := d.c.Update(ctx, n)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
}

func (d *demo) waitSettled(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	why := ""
	for time.Now().Before(deadline) {
		done, reason, err := controlplane.Settled(ctx, d.c, d.ns)
		if err != nil {
			return err
		}
		if done && d.allPods(ctx) {
			return nil
		}
		why = reason
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("the tenant did not settle within %s: %s", timeout, why)
}

// allPods reports whether every StatefulSet of the tenant has the pods it
// wants, all Ready.
func (d *demo) allPods(ctx context.Context) bool {
	var sets appsv1.StatefulSetList
	if err := d.c.List(ctx, &sets, client.InNamespace(d.ns)); err != nil {
		return false
	}
	for _, s := range sets.Items {
		if s.Spec.Replicas != nil && (s.Status.ReadyReplicas != *s.Spec.Replicas || s.Status.Replicas != *s.Spec.Replicas) {
			return false
		}
	}
	return true
}

// keep leaves the control plane up and tells how to use it.
func (d *demo) keep(ctx context.Context, h *controlplane.Harness) error {
	dir, err := os.MkdirTemp("", "express-sequencer-demo-")
	if err != nil {
		return err
	}
	kubeconfig, err := h.KubeconfigFile(dir)
	if err != nil {
		return err
	}
	manifest := filepath.Join(dir, "acme-fe5.yaml")
	if err := os.WriteFile(manifest, []byte(`apiVersion: express.medallia.com/v2alpha1
kind: Frontend
metadata:
  name: acme-fe5
spec:
  clusterConfig: {clusterName: acme, tenantID: "123634", tenantName: acme}
  expressVersion: `+v155+`
`), 0o600); err != nil {
		return err
	}
	d.say(`
The control plane stays up until Ctrl-C. In another terminal:

  export KUBECONFIG=%[1]s
  export PATH=%[2]s:%[3]s:$PATH     # kubectl, and the kubectl express plugin (make build)
  kubectl get backends,frontends -n %[4]s
  kubectl express plan acme -n %[4]s
  kubectl express explain acme-fe4 -n %[4]s
  kubectl apply --dry-run=server -o yaml -n %[4]s -f %[5]s   # the defaults and gate the webhook would add
  kubectl apply -n %[4]s -f %[5]s                            # then watch: kubectl express plan acme -n %[4]s -w
  kubectl events -n %[4]s`, kubeconfig, os.Getenv("KUBEBUILDER_ASSETS"), filepath.Join(controlplane.Root(), "bin"), ns, manifest)
	<-ctx.Done()
	_ = os.RemoveAll(dir)
	return nil
}
