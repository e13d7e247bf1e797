// Package controlplane starts a real kube-apiserver and etcd (envtest) with
// the Express CRDs and the webhook configurations of config/ installed, the
// webhooks pointing at a local express-sequencer. Tests, benchmarks and the
// local demo all run on it.
package controlplane

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/scheme"
)

// namePrefix is what config/default's kustomization prefixes names with; the
// local install uses the same names as a cluster install.
const namePrefix = "express-sequencer-"

// Root returns the repository root, found from this file's location.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// ControlPlane is a running kube-apiserver + etcd with the Express CRDs and
// webhook configurations installed.
type ControlPlane struct {
	// Env is the envtest environment.
	Env *envtest.Environment
	// Config is an admin rest.Config for the API server.
	Config *rest.Config
	// Client is an uncached admin client.
	Client client.Client
	// WebhookPort is where the webhook configurations send admission reviews,
	// on 127.0.0.1.
	WebhookPort int
	// restarted are API server processes StopAPIServer's start ran.
	restarted []restartedAPIServer
}

// restartedAPIServer is an API server process StopAPIServer's start ran, and
// the file its output goes to, removed when it stops.
type restartedAPIServer struct {
	cmd  *exec.Cmd
	logs *os.File
}

// Start starts the control plane. KUBEBUILDER_ASSETS must name a directory
// with kube-apiserver and etcd (`hack/control-plane.sh` prints one).
func Start() (*ControlPlane, error) { return StartWith(nil) }

// StartWith starts the control plane with kube-apiserver flags set beside
// envtest's (name without dashes → value), as a benchmark compares
// settings of the server.
func StartWith(apiServerFlags map[string]string) (*ControlPlane, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run the tests with `make test`, which builds kube-apiserver and etcd and sets it")
	}
	ctrl.SetLogger(TestLogger())
	crds, err := expressOperatorCRDs()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{CRDs: crds}
	for name, value := range apiServerFlags {
		env.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	cp := &ControlPlane{Env: env, Config: cfg}
	if cp.Client, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	if cp.WebhookPort, err = FreePort(); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	if err := cp.installWebhookConfigurations(context.Background()); err != nil {
		return nil, errors.Join(err, env.Stop())
	}
	return cp, nil
}

// Stop stops the API server and etcd (and an API server started again by
// StopAPIServer's start).
func (cp *ControlPlane) Stop() error {
	var errs []error
	for _, r := range cp.restarted {
		_ = r.cmd.Process.Signal(syscall.SIGTERM)
		_ = r.cmd.Wait()
		errs = append(errs, r.logs.Close(), os.Remove(r.logs.Name()))
	}
	return errors.Join(append(errs, cp.Env.Stop())...)
}

// KubeconfigFile writes an admin kubeconfig into dir and returns its path.
func (cp *ControlPlane) KubeconfigFile(dir string) (string, error) {
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, cp.Env.KubeConfig, 0o600)
}

// installWebhookConfigurations creates the generated webhook configurations
// of config/webhook with the names a cluster install gives them, each webhook
// calling https://127.0.0.1:<WebhookPort><path>. Their CA bundle is left
// empty: express-sequencer injects its own, as in self-signed mode.
func (cp *ControlPlane) installWebhookConfigurations(ctx context.Context) error {
	data, err := os.ReadFile(filepath.Join(Root(), "config", "webhook", "manifests.yaml"))
	if err != nil {
		return fmt.Errorf("reading webhook manifests: %w", err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("decoding webhook manifests: %w", err)
		}
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		var meta metav1.TypeMeta
		if err := json.Unmarshal(raw, &meta); err != nil {
			return err
		}
		var obj client.Object
		switch meta.Kind {
		case "MutatingWebhookConfiguration":
			cfg := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if err := json.Unmarshal(raw, cfg); err != nil {
				return err
			}
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].ClientConfig = cp.clientConfig(cfg.Webhooks[i].ClientConfig)
			}
			obj = cfg
		case "ValidatingWebhookConfiguration":
			cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if err := json.Unmarshal(raw, cfg); err != nil {
				return err
			}
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].ClientConfig = cp.clientConfig(cfg.Webhooks[i].ClientConfig)
			}
			obj = cfg
		default:
			return fmt.Errorf("unexpected %s in webhook manifests", meta.Kind)
		}
		obj.SetName(namePrefix + obj.GetName())
		if err := cp.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %s %s: %w", meta.Kind, obj.GetName(), err)
		}
	}
}

func (cp *ControlPlane) clientConfig(in admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.WebhookClientConfig {
	path := ""
	if in.Service != nil && in.Service.Path != nil {
		path = *in.Service.Path
	}
	url := fmt.Sprintf("https://127.0.0.1:%d%s", cp.WebhookPort, path)
	return admissionregistrationv1.WebhookClientConfig{URL: &url}
}

// PointWebhooksAt sends admission reviews to another port from now on, as a
// Service does when the pod behind it changes; the CA bundle stays as it is.
func (cp *ControlPlane) PointWebhooksAt(ctx context.Context, port int) error {
	move := func(c *admissionregistrationv1.WebhookClientConfig) {
		u, err := url.Parse(*c.URL)
		if err != nil {
			return // installWebhookConfigurations wrote it: it parses
		}
		u.Host = fmt.Sprintf("127.0.0.1:%d", port)
		moved := u.String()
		c.URL = &moved
	}
	var m admissionregistrationv1.MutatingWebhookConfigurationList
	if err := cp.Client.List(ctx, &m); err != nil {
		return err
	}
	for i := range m.Items {
		for j := range m.Items[i].Webhooks {
			move(&m.Items[i].Webhooks[j].ClientConfig)
		}
		if err := cp.Client.Update(ctx, &m.Items[i]); err != nil {
			return err
		}
	}
	var v admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := cp.Client.List(ctx, &v); err != nil {
		return err
	}
	for i := range v.Items {
		for j := range v.Items[i].Webhooks {
			move(&v.Items[i].Webhooks[j].ClientConfig)
		}
		if err := cp.Client.Update(ctx, &v.Items[i]); err != nil {
			return err
		}
	}
	return nil
}

// ManagerOptions are express-sequencer's options for serving this control
// plane's webhooks from certDir with self-signed certificates.
func (cp *ControlPlane) ManagerOptions(certDir string, log logr.Logger) app.Options {
	o := app.DefaultOptions()
	o.WebhookHost = "127.0.0.1"
	o.WebhookPort = cp.WebhookPort
	o.CertDir = certDir
	o.CertHosts = []string{"127.0.0.1", "localhost"}
	o.MetricsAddr = "0"
	o.ProbeAddr = "0"
	o.CertWatch = 200 * time.Millisecond
	o.Log = log
	return o
}

// StartManager builds express-sequencer's manager with o and runs it until
// the returned stop is called, as a Deployment runs a replica: a manager
// that stops on its own (a replica whose lease renewal kube-apiserver did
// not answer within its renew deadline stops, webhooks and all) is built
// and started again, as the kubelet restarts its container. It returns once
// the API server reaches the webhooks; mgr is the first manager run.
func (cp *ControlPlane) StartManager(o app.Options) (mgr manager.Manager, stop func(), err error) {
	return cp.StartManagerAs(cp.Config, o)
}

// StartManagerAs is StartManager with the identity of cfg.
func (cp *ControlPlane) StartManagerAs(cfg *rest.Config, o app.Options) (mgr manager.Manager, stop func(), err error) {
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err = app.New(ctx, cfg, o)
	if err != nil {
		cancel()
		return nil, nil, err
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		restartReplica(ctx, mgr, func() (manager.Manager, error) { return app.New(ctx, cfg, o) })
	}()
	var once sync.Once
	stop = func() { // a second call returns at once: a test's cleanup may stop what it stopped
		once.Do(func() {
			cancel()
			<-done
		})
	}
	if err := cp.WaitForWebhooks(ctx, time.Minute); err != nil {
		stop()
		return nil, nil, err
	}
	return mgr, stop, nil
}

// restartBackoff is how long a replica that stopped on its own stays down
// before it is started again (the kubelet's first crash-loop back-off is
// 10 s; a test waits less).
const restartBackoff = time.Second

// restartReplica runs mgr until ctx ends; each time the running manager
// stops on its own first, it says why on stderr and, after restartBackoff,
// runs one built by build.
func restartReplica(ctx context.Context, mgr manager.Manager, build func() (manager.Manager, error)) {
	for {
		err := mgr.Start(ctx)
		if ctx.Err() != nil {
			return
		}
		for {
			fmt.Fprintf(os.Stderr, "express-sequencer replica stopped on its own, or could not be built again (%v): started again in %s, as the kubelet restarts its container\n", err, restartBackoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(restartBackoff):
			}
			if mgr, err = build(); err == nil {
				break
			}
		}
	}
}

// WaitForWebhooks waits until the API server gets answers from the webhooks:
// a dry-run create of a Backend goes through both of them.
func (cp *ControlPlane) WaitForWebhooks(ctx context.Context, timeout time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		probe := &v2alpha1.Backend{
			ObjectMeta: metav1.ObjectMeta{Name: "webhook-probe-be", Namespace: metav1.NamespaceDefault},
			Spec:       v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "webhook-probe"}},
		}
		last = cp.Client.Create(ctx, probe, client.DryRunAll)
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("webhooks not reachable from the API server: %w (last: %v)", err, last)
	}
	return nil
}

// TestLogger logs to stderr when EXPRESS_TEST_LOG is set, and nowhere else.
func TestLogger() logr.Logger {
	if os.Getenv("EXPRESS_TEST_LOG") == "" {
		return logr.Discard()
	}
	zl, err := zap.NewDevelopment()
	if err != nil {
		return logr.Discard()
	}
	return zapr.NewLogger(zl)
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// CreateWithoutMutation creates obj while no mutating webhook configuration
// is registered, as an object stored before express-sequencer was installed,
// and registers the configurations again. Tests that use it must not run in
// parallel with other admission tests.
func (cp *ControlPlane) CreateWithoutMutation(ctx context.Context, obj v2alpha1.Node) error {
	var m admissionregistrationv1.MutatingWebhookConfigurationList
	if err := cp.Client.List(ctx, &m); err != nil {
		return err
	}
	for i := range m.Items {
		if err := cp.Client.Delete(ctx, &m.Items[i]); err != nil {
			return err
		}
	}
	// The API server calls webhooks by its own informer's view of their
	// configurations: wait until it sees them gone, create, and wait until it
	// sees them back.
	createErr := cp.waitForMutation(ctx, obj, false)
	if createErr == nil {
		createErr = cp.Client.Create(ctx, obj)
	}
	for i := range m.Items {
		cfg := m.Items[i].DeepCopy()
		cfg.ResourceVersion, cfg.UID = "", ""
		if err := cp.Client.Create(ctx, cfg); err != nil {
			return errors.Join(createErr, err)
		}
	}
	return errors.Join(createErr, cp.waitForMutation(ctx, obj, true))
}

// waitForMutation waits until a dry-run create of a copy of obj comes back
// stamped by the mutating webhook (want true) or not (want false).
func (cp *ControlPlane) waitForMutation(ctx context.Context, obj v2alpha1.Node, want bool) error {
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		probe := obj.DeepCopyObject().(v2alpha1.Node)
		probe.SetName("")
		probe.SetGenerateName(obj.GetName() + "-probe-")
		probe.SetResourceVersion("")
		if err := cp.Client.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, err
		}
		_, stamped := probe.GetAnnotations()[v2alpha1.AnnotationTargetHash]
		return stamped == want, nil
	})
}
