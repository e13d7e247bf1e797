package controlplane

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// KWOK's annotation of the Nodes it plays the kubelet of.
const (
	kwokNodeAnnotation = "kwok.x-k8s.io/node"
	kwokNodeFake       = "fake"
)

// CrashAnnotation makes KWOK crash a pod in place: its container waits in
// CrashLoopBackOff, the pod not Ready (hack/kwok/stage-crash-loop.yaml).
const CrashAnnotation = "crash-loop.stage.kwok.x-k8s.io/crash"

// Cluster is Kubernetes' own control loops running beside a control plane:
// kube-controller-manager (the StatefulSet controller, the garbage
// collector, node lifecycle, disruption), kube-scheduler, and KWOK as the
// kubelet of a few fake Nodes — pods are scheduled, started, made Ready
// and deleted after their grace period by Kubernetes, not by test code.
type Cluster struct {
	// Nodes are the fake Nodes' names.
	Nodes []string
	// LogDir holds each process's log (kube-controller-manager.log, ...).
	LogDir string
	cp     *ControlPlane
	procs  []*exec.Cmd
}

// StartCluster starts kube-controller-manager, kube-scheduler and KWOK
// managing nodes fake Nodes, and waits until the Nodes are Ready. The
// binaries and KWOK's stages are read from KUBEBUILDER_ASSETS
// (hack/control-plane.sh builds them).
func (cp *ControlPlane) StartCluster(nodes int) (*Cluster, error) {
	return cp.StartClusterWith(nodes)
}

// StartClusterWith starts a Cluster as StartCluster does, with
// kube-controller-manager given the extra flags controllerFlags (the
// benchmark's -controller-qps: --kube-api-qps, --kube-api-burst).
func (cp *ControlPlane) StartClusterWith(nodes int, controllerFlags ...string) (*Cluster, error) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	for _, b := range []string{"kube-controller-manager", "kube-scheduler", "kwok", "kwok-stages.yaml"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return nil, fmt.Errorf("KUBEBUILDER_ASSETS=%s has no %s: run `make test`, which builds it (hack/control-plane.sh)", assets, b)
		}
	}
	dir, err := os.MkdirTemp("", "express-cluster-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{LogDir: dir, cp: cp}
	admin, err := cp.Env.ControlPlane.AddUser(envtest.User{Name: "cluster-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, fmt.Errorf("adding the control loops' identity: %w", err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	kc := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kc, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	auth := []string{"--kubeconfig=" + kc, "--authentication-kubeconfig=" + kc, "--authorization-kubeconfig=" + kc, "--leader-elect=false", "--secure-port=0"}
	for _, p := range []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", append(append(slices.Clone(auth),
			"--controllers=*,-serviceaccount-token,-csrsigning,-bootstrapsigner,-tokencleaner",
			"--use-service-account-credentials=false",
			// A Node that stops answering is NotReady after 10 s (not 50 s).
			"--node-monitor-grace-period=10s", "--node-monitor-period=1s",
		), controllerFlags...)},
		{"kube-scheduler", auth},
		{"kwok", []string{"--kubeconfig=" + kc, "--manage-all-nodes=false",
			"--manage-nodes-with-annotation-selector=" + kwokNodeAnnotation + "=" + kwokNodeFake,
			"--cidr=10.0.0.1/24", "--node-ip=10.0.0.1", "--config=" + filepath.Join(assets, "kwok-stages.yaml"),
		}},
	} {
		if err := c.start(filepath.Join(assets, p.name), p.args); err != nil {
			return nil, errors.Join(err, c.Stop())
		}
	}
	ctx := context.Background()
	for i := range nodes {
		name := "kwok-node-" + strconv.Itoa(i)
		if err := c.AddNode(ctx, name); err != nil {
			return nil, errors.Join(err, c.Stop())
		}
	}
	return c, nil
}

// Crash makes the Express nodes named crash of namespace fail in place, as
// a bad configuration or a lost dependency does: KWOK turns every pod of
// theirs not Ready, its container waiting in CrashLoopBackOff
// (CrashAnnotation). Their pods stay so until deleted: successors run
// (a rollout's, or those Mend has recreated). It returns once every pod of
// each of them fails.
func (c *Cluster) Crash(ctx context.Context, namespace string, crash ...string) error {
	for _, name := range crash {
		var pods corev1.PodList
		if err := c.cp.Client.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{v2alpha1.LabelNode: name}); err != nil {
			return err
		}
		if len(pods.Items) == 0 {
			return fmt.Errorf("%s/%s has no pod to crash", namespace, name)
		}
		for i := range pods.Items {
			p := &pods.Items[i]
			patch := client.MergeFrom(p.DeepCopy())
			metav1.SetMetaDataAnnotation(&p.ObjectMeta, CrashAnnotation, "true")
			if err := c.cp.Client.Patch(ctx, p, patch); err != nil {
				return err
			}
		}
	}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range crash {
			var pods corev1.PodList
			if err := c.cp.Client.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{v2alpha1.LabelNode: name}); err != nil {
				return false, nil
			}
			for _, p := range pods.Items {
				if !slices.ContainsFunc(p.Status.ContainerStatuses, func(s corev1.ContainerStatus) bool {
					return s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff"
				}) {
					return false, nil
				}
			}
		}
		return true, nil
	})
}

// Mend deletes the crashed pods of namespace, as an on-call engineer does
// once the cause is gone: their StatefulSets recreate them, and the
// successors run.
func (c *Cluster) Mend(ctx context.Context, namespace string) error {
	var pods corev1.PodList
	if err := c.cp.Client.List(ctx, &pods, client.InNamespace(namespace), client.HasLabels{v2alpha1.LabelNode}); err != nil {
		return err
	}
	for i := range pods.Items {
		if pods.Items[i].Annotations[CrashAnnotation] == "true" {
			if err := c.cp.Client.Delete(ctx, &pods.Items[i]); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	return nil
}

func (c *Cluster) start(bin string, args []string) error {
	log, err := os.OpenFile(filepath.Join(c.LogDir, filepath.Base(bin)+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the test binary
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", filepath.Base(bin), err)
	}
	c.procs = append(c.procs, cmd)
	return nil
}

// RestartScheduler kills kube-scheduler and starts it again with the same
// flags, as an operator restarts one that stopped scheduling (its log goes
// on in the same file).
func (c *Cluster) RestartScheduler() error {
	for _, cmd := range c.procs {
		if filepath.Base(cmd.Path) != "kube-scheduler" || cmd.ProcessState != nil {
			continue
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return c.start(cmd.Path, cmd.Args[1:])
	}
	return errors.New("no kube-scheduler running")
}

// AddNode creates a fake Node KWOK plays the kubelet of, and waits until
// it is Ready and schedulable.
func (c *Cluster) AddNode(ctx context.Context, name string) error {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{kwokNodeAnnotation: kwokNodeFake},
			Labels:      map[string]string{"type": "kwok", corev1.LabelHostname: name},
		},
	}
	if err := c.cp.Client.Create(ctx, n); err != nil {
		return fmt.Errorf("creating Node %s: %w", name, err)
	}
	c.Nodes = append(c.Nodes, name)
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.cp.Client.Get(ctx, client.ObjectKeyFromObject(n), n); err != nil {
			return false, nil
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// Cordon marks a fake Node unschedulable, or schedulable again.
func (c *Cluster) Cordon(ctx context.Context, name string, cordon bool) error {
	n := &corev1.Node{}
	if err := c.cp.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
		return err
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Unschedulable = cordon
	return c.cp.Client.Patch(ctx, n, patch)
}

// DeleteNode deletes a fake Node, as a machine that is gone: the pod
// garbage collector deletes the pods bound to it (after its quarantine of
// orphaned pods, 40 s).
func (c *Cluster) DeleteNode(ctx context.Context, name string) error {
	err := c.cp.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// Stop stops the control loops (the control plane goes on) and removes
// their logs unless KEEP_CLUSTER_LOGS is set.
func (c *Cluster) Stop() error {
	var errs []error
	for _, p := range c.procs {
		_ = p.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range c.procs {
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			errs = append(errs, p.Process.Kill())
		}
	}
	if os.Getenv("KEEP_CLUSTER_LOGS") == "" {
		errs = append(errs, os.RemoveAll(c.LogDir))
	}
	return errors.Join(errs...)
}

// PodDelays are the annotations that set how long KWOK takes to start a
// pod and make it Ready (KWOK's pod/general stages read them): what the pod
// template of an Express pod run on a Cluster carries.
func PodDelays(start, ready time.Duration) map[string]string {
	return map[string]string{
		"pod-create.stage.kwok.x-k8s.io/delay": start.String(), "pod-create.stage.kwok.x-k8s.io/jitter-delay": start.String(),
		"pod-ready.stage.kwok.x-k8s.io/delay": ready.String(), "pod-ready.stage.kwok.x-k8s.io/jitter-delay": ready.String(),
		"pod-init-container-running.stage.kwok.x-k8s.io/delay": "0s", "pod-init-container-running.stage.kwok.x-k8s.io/jitter-delay": "0s",
		"pod-init-container-completed.stage.kwok.x-k8s.io/delay": "0s", "pod-init-container-completed.stage.kwok.x-k8s.io/jitter-delay": "0s",
	}
}
