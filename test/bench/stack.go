package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/testing/simoperator"
)

// stack is what a benchmark runs on: kube-apiserver and etcd, the
// express-sequencer binary in its own process, and the operator's side
// (the simulated operator, or Kubernetes' own control loops with -cluster).
type stack struct {
	cp *controlplane.ControlPlane
	// c is the driver's client (a high rate limit).
	c   client.Client
	cfg *rest.Config
	seq *exec.Cmd
	// metricsURL is the sequencer's /metrics, pprofURL its pprof server.
	metricsURL, pprofURL string
	rec                  *recorder
	// evict deletes every pod of the nodes at once, as a lost machine
	// takes them.
	evict func(ctx context.Context, ns string, nodes ...string) error
}

// startStack starts the stack; stop tears it down, newest first.
func startStack(ctx context.Context, o options, out io.Writer) (st *stack, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	dir, err := os.MkdirTemp("", "express-sequencer-bench-")
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, func() { os.RemoveAll(dir) })

	binary := o.binary
	if binary == "" {
		binary = filepath.Join(dir, "express-sequencer")
		args := []string{"build", "-o", binary}
		if o.cacheFloor {
			args = append(args, "-tags", "cachefloor")
		}
		build := exec.Command("go", append(args, "./cmd/express-sequencer")...)
		build.Dir, build.Stdout, build.Stderr = controlplane.Root(), out, os.Stderr
		if err := build.Run(); err != nil {
			return nil, stop, fmt.Errorf("building express-sequencer: %w", err)
		}
	}
	var serverFlags map[string]string
	if o.noWatchCache {
		serverFlags = map[string]string{"watch-cache": "false"}
		fmt.Fprintln(out, "Starting kube-apiserver --watch-cache=false and etcd…")
	} else {
		fmt.Fprintln(out, "Starting kube-apiserver and etcd…")
	}
	cp, err := controlplane.StartWith(serverFlags)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, func() { _ = cp.Stop() })
	st = &stack{cp: cp, cfg: rest.CopyConfig(cp.Config)}
	st.cfg.QPS, st.cfg.Burst = 1000, 2000
	if st.c, err = client.New(st.cfg, client.Options{Scheme: scheme.New()}); err != nil {
		return nil, stop, err
	}

	kubeconfig, err := cp.KubeconfigFile(dir)
	if err != nil {
		return nil, stop, err
	}
	metricsPort, err := controlplane.FreePort()
	if err != nil {
		return nil, stop, err
	}
	pprofPort, err := controlplane.FreePort()
	if err != nil {
		return nil, stop, err
	}
	st.metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	st.pprofURL = fmt.Sprintf("http://127.0.0.1:%d", pprofPort)
	st.seq = exec.CommandContext(ctx, binary,
		"--kubeconfig", kubeconfig, "--webhook-host", "127.0.0.1", "--webhook-port", strconv.Itoa(cp.WebhookPort),
		"--cert-dir", filepath.Join(dir, "certs"), "--cert-hosts", "127.0.0.1",
		"--metrics-bind-address", fmt.Sprintf("127.0.0.1:%d", metricsPort), "--metrics-secure=false", "--health-probe-bind-address", "0",
		"--settle-time", o.settle.String(), "--max-concurrent-reconciles", strconv.Itoa(o.concurrency),
		"--recheck-releases="+strconv.FormatBool(o.recheckReleases), "--audit="+strconv.FormatBool(!o.noAudit),
		"--scoped-reads="+strconv.FormatBool(o.scopedReads), "--pod-reads-by-name="+strconv.FormatBool(o.podReadsByName),
		"--kube-api-qps", "500", "--kube-api-burst", "1000", "--log-level", "error",
		"--pprof-bind-address", fmt.Sprintf("127.0.0.1:%d", pprofPort))
	if o.memoryLimit != "" {
		st.seq.Env = append(os.Environ(), "GOMEMLIMIT="+o.memoryLimit)
	}
	st.seq.Stdout, st.seq.Stderr = os.Stderr, os.Stderr
	if err := st.seq.Start(); err != nil {
		return nil, stop, fmt.Errorf("starting express-sequencer: %w", err)
	}
	stops = append(stops, func() { _ = st.seq.Process.Kill(); _ = st.seq.Wait() })
	if err := cp.WaitForWebhooks(ctx, time.Minute); err != nil {
		return nil, stop, err
	}

	st.rec = &recorder{starts: map[string][]simoperator.Start{}, readyAt: map[string]time.Time{}, released: map[string][]time.Time{},
		readyOn: map[string]map[string]bool{},
		ready:   map[string]*atomic.Int64{phase(v1, ""): {}, o.upgraded(): {}}}
	opCP := *cp
	opCP.Config = st.cfg
	if o.cluster {
		stopCluster, err := startCluster(ctx, &opCP, st.rec, o.controllerQPS, out)
		if err != nil {
			return nil, stop, err
		}
		stops = append(stops, stopCluster)
		if o.pin {
			if err := pinStack(st.seq.Process.Pid); err != nil {
				return nil, stop, err
			}
		}
		// Every pod of the nodes in one call, as a lost machine takes them:
		// their StatefulSets recreate them.
		st.evict = func(ctx context.Context, ns string, nodes ...string) error {
			in, err := labels.NewRequirement(v2alpha1.LabelNode, selection.In, nodes)
			if err != nil {
				return err
			}
			return st.c.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*in)})
		}
		return st, stop, nil
	}
	op := &simoperator.Operator{ReadyAfter: 0, RecoverAfter: time.Second, OnStart: st.rec.onStart, OnReady: st.rec.onReady, OnUngated: st.rec.onUngated, StatefulSets: o.statefulSets}
	stopOp, err := opCP.StartOperator(op)
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, stopOp)
	if o.pin {
		if err := pinStack(st.seq.Process.Pid); err != nil {
			return nil, stop, err
		}
	}
	st.evict = func(ctx context.Context, ns string, nodes ...string) error { return op.Evict(ctx, st.c, ns, nodes...) }
	return st, stop, nil
}
