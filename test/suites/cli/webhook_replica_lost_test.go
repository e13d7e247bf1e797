package cli

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/test/framework/tenantchart"
)

// roundRobin spreads TCP connections over its backends in turn, as a
// Service's rules spread them over its pods; drop takes a backend out, as
// the endpoints controller does once a pod is gone. A connection to a
// backend that does not answer is closed at once, as one to a dead pod is
// refused.
type roundRobin struct {
	ln       net.Listener
	mu       sync.Mutex
	backends []string
	next     int
	// open are the client connections being served.
	open map[net.Conn]bool
	// unanswered counts connections sent to a backend that did not answer.
	unanswered atomic.Int64
}

func newRoundRobin(t *testing.T, backends ...string) *roundRobin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	r := &roundRobin{ln: ln, backends: backends, open: map[net.Conn]bool{}}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go r.serve(conn)
		}
	}()
	return r
}

func (r *roundRobin) serve(conn net.Conn) {
	defer conn.Close()
	r.mu.Lock()
	backend := r.backends[r.next%len(r.backends)]
	r.next++
	r.open[conn] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.open, conn)
		r.mu.Unlock()
	}()
	up, err := net.DialTimeout("tcp", backend, time.Second)
	if err != nil {
		r.unanswered.Add(1)
		return
	}
	defer up.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, conn); done <- struct{}{} }()
	go func() { _, _ = io.Copy(conn, up); done <- struct{}{} }()
	<-done
}

// closeAll closes every client connection being served: the API server
// dials again for its next calls, and those are spread over the backends
// as they are then. Without it, the calls after a backend is lost may all
// ride connections kept open to the other one, and the loss go unfelt.
func (r *roundRobin) closeAll() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for conn := range r.open {
		_ = conn.Close()
	}
}

func (r *roundRobin) drop(backend string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.backends = slices.DeleteFunc(r.backends, func(b string) bool { return b == backend })
}

func (r *roundRobin) port() int { return r.ln.Addr().(*net.TCPAddr).Port }

// helmIn is Helm's action configuration for namespace ns, as the helm CLI
// builds it from a kubeconfig.
func helmIn(t *testing.T, kubeconfig, ns string) *action.Configuration {
	t.Helper()
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &kubeconfig, &ns
	cfg := new(action.Configuration)
	require.NoError(t, cfg.Init(flags, ns, "secret", func(string, ...any) {}))
	return cfg
}

// Two replicas serve the webhooks behind one address, connections spread
// over both, while 20 tenants are upgraded with helm upgrade (Helm's own
// code) all at once; one replica is stopped in the middle, and the address
// keeps sending to it for two seconds, as a Service does until the
// endpoints controller takes a dead pod out. Every Backend and Frontend
// stored meanwhile is whole — its defaults injected and its target hash
// stamped for the spec it holds — and carries the sequencer's gate unless
// the sequencer released that very target; each refused upgrade failed
// with the API server's word that the webhook could not be called. The
// refused upgrades, run again, go through, and every tenant rolls out in
// order.
func TestAWebhookReplicaLostMidHelmUpgradeLeavesEveryNodeWholeAndGated(t *testing.T) {
	ctx := context.Background()
	cp, err := controlplane.Start()
	require.NoError(t, err)
	defer func() { assert.NoError(t, cp.Stop()) }()

	portB, stopReplicaA, stopB := twoReplicas(t, cp, "replica-lost-test")
	defer stopB()
	var stopOnce sync.Once
	stopA := func() { stopOnce.Do(stopReplicaA) }
	defer stopA()
	addrA, addrB := "127.0.0.1:"+strconv.Itoa(cp.WebhookPort), "127.0.0.1:"+strconv.Itoa(portB)
	service := newRoundRobin(t, addrA, addrB)
	require.NoError(t, cp.PointWebhooksAt(ctx, service.port()))

	pods, stopStack, err := realStack(cp)
	require.NoError(t, err)
	defer stopStack()
	kubeconfig, err := cp.KubeconfigFile(t.TempDir())
	require.NoError(t, err)
	tenantChart, err := loader.Load(tenantchart.Dir())
	require.NoError(t, err)

	const tenants = 20
	namespaces := make([]string, tenants)
	for i := range namespaces {
		namespaces[i] = fmt.Sprintf("lost-replica-%02d", i)
		require.NoError(t, cp.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaces[i]}}))
		install := action.NewInstall(helmIn(t, kubeconfig, namespaces[i]))
		install.Namespace, install.ReleaseName = namespaces[i], "acme"
		_, err := install.Run(tenantChart, map[string]any{"namespace": namespaces[i]})
		require.NoError(t, err, "helm install into %s", namespaces[i])
	}
	settled := func() bool {
		for _, ns := range namespaces {
			if ok, _, err := controlplane.Settled(ctx, cp.Client, ns); err != nil || !ok {
				return false
			}
		}
		return true
	}
	require.Eventually(t, settled, 3*time.Minute, 100*time.Millisecond, "every tenant provisioned")
	marks := map[string]int{}
	for _, ns := range namespaces {
		marks[ns] = len(startsIn(pods, ns))
	}

	upgrade := func(ns string) error {
		up := action.NewUpgrade(helmIn(t, kubeconfig, ns))
		up.Namespace = ns
		_, err := up.Run("acme", tenantChart, map[string]any{"namespace": ns,
			"expressVersion": map[string]any{"Backend": "express-e689.154", "Frontend": "express-e689.154"}})
		return err
	}
	errs := make([]error, tenants)
	var wg sync.WaitGroup
	for i, ns := range namespaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			time.Sleep(time.Duration(i) * 100 * time.Millisecond)
			errs[i] = upgrade(ns)
		}()
	}
	time.Sleep(tenants / 2 * 100 * time.Millisecond) // half of them on their way
	stopA()
	service.closeAll()          // the calls still to come dial again, half of them to the lost replica
	time.Sleep(2 * time.Second) // until the endpoints controller takes it out
	service.drop(addrA)
	wg.Wait()

	assert.Positive(t, service.unanswered.Load(), "connections went to the lost replica: the loss was felt")
	var refused []string
	for i, err := range errs {
		if err != nil {
			refused = append(refused, namespaces[i])
			assert.Contains(t, err.Error(), "failed calling webhook", "%s: the upgrade failed with the webhook's unavailability: %v", namespaces[i], err)
		}
	}
	t.Logf("upgrades refused while the replica was lost: %d of %d", len(refused), tenants)
	wholeAndGated(t, ctx, cp, namespaces)

	for _, ns := range refused {
		deadline := time.Now().Add(time.Minute)
		for err := upgrade(ns); err != nil; err = upgrade(ns) {
			require.True(t, time.Now().Before(deadline), "helm upgrade of %s, run again: %v", ns, err)
			time.Sleep(time.Second)
		}
	}
	require.Eventually(t, settled, 3*time.Minute, 100*time.Millisecond, "every tenant upgraded")
	wholeAndGated(t, ctx, cp, namespaces)
	for _, ns := range namespaces {
		assert.Equal(t, "acme-fe1 acme-fe2 acme-be acme-fe3 acme-fe4", strings.Join(startsIn(pods, ns)[marks[ns]:], " "), "%s rolled each node once, in order", ns)
	}
}

// wholeAndGated checks every stored Backend and Frontend of namespaces: its
// defaults injected, its target hash the hash of the spec it holds, and the
// sequencer's gate on it unless the sequencer released that target.
func wholeAndGated(t *testing.T, ctx context.Context, cp *controlplane.ControlPlane, namespaces []string) {
	t.Helper()
	for _, ns := range namespaces {
		nodes, err := controlplane.Nodes(ctx, cp.Client, ns)
		require.NoError(t, err)
		require.Len(t, nodes, 5, ns)
		stored := map[string]string{} // node → the target hash of its spec as stored
		for _, kind := range []string{v2alpha1.KindBackend, v2alpha1.KindFrontend} {
			var list unstructured.UnstructuredList
			list.SetGroupVersionKind(v2alpha1.GroupVersion.WithKind(kind + "List"))
			require.NoError(t, cp.Client.List(ctx, &list, client.InNamespace(ns)))
			for _, u := range list.Items {
				raw, err := u.MarshalJSON()
				require.NoError(t, err)
				if stored[u.GetName()], err = rollout.TargetHashOfObject(raw); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, n := range nodes {
			assert.Equal(t, stored[n.GetName()], rollout.StampedTarget(n), "%s/%s: its target hash is stamped for the spec it holds", ns, n.GetName())
			assert.NotNil(t, n.NodeSpec().DeploymentDependencies, "%s/%s: its defaults are injected", ns, n.GetName())
			assert.True(t, rollout.Gated(n) || rollout.ReleasedTarget(n) == rollout.StampedTarget(n),
				"%s/%s: stored without its gate for a target the sequencer never released", ns, n.GetName())
		}
	}
}
