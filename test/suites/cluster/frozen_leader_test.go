package cluster

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// replica is an express-sequencer process: the binary, as a Deployment
// runs it, sequencing only (the suite serves the webhooks).
type replica struct {
	cmd  *exec.Cmd
	log  *syncBuffer
	done chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startReplica runs the binary with leader election on its Lease in
// namespace ns, retried every 200 ms: a lease of lease, given up after
// renew without renewal.
func startReplica(t *testing.T, binary, kubeconfig, ns, lease, renew string) *replica {
	t.Helper()
	r := &replica{log: &syncBuffer{}, done: make(chan error, 1)}
	r.cmd = exec.Command(binary, "--kubeconfig", kubeconfig, "--webhooks=false",
		"--leader-elect", "--leader-election-namespace", ns,
		"--leader-election-lease-duration", lease, "--leader-election-renew-deadline", renew, "--leader-election-retry-period", "200ms",
		"--settle-time", "300ms", "--progress-deadline", "1m",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0")
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	require.NoError(t, r.cmd.Start())
	go func() { r.done <- r.cmd.Wait() }()
	t.Cleanup(func() {
		_ = r.cmd.Process.Signal(syscall.SIGCONT)
		_ = r.cmd.Process.Kill()
		<-r.done
		if t.Failed() {
			t.Logf("replica %d:\n%s", r.cmd.Process.Pid, r.log.String())
		}
	})
	return r
}

// The leading replica is frozen (SIGSTOP) just after it released fe1, for
// longer than its lease; the other replica takes over and carries on. The
// frozen one is resumed: whatever writes it had under way go out on a view
// of the tenant seconds old (whether it had any is left to chance; the
// release guard's refusal of such a write is shown by the stale-replica
// tests of the integration suite), move nothing out of order, and it finds
// its lease gone and stops. The change completes fe1, fe2, be, fe3, each
// after the last was Ready.
func TestAFrozenLeaderResumedAfterItsLeasePassedReleasesNothingOutOfOrder(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	binary := filepath.Join(dir, "express-sequencer")
	build := exec.Command("go", "build", "-o", binary, "./cmd/express-sequencer")
	build.Dir = controlplane.Root()
	out, err := build.CombinedOutput()
	require.NoError(t, err, "building express-sequencer: %s", out)
	kubeconfig, err := harness.KubeconfigFile(dir)
	require.NoError(t, err)

	ns := settledTenant(t, 4, 1)
	stopSequencer() // the suite's in-process sequencer makes way for the two replicas
	t.Cleanup(func() { require.NoError(t, startSequencer()) })

	leaseHolder := func() string {
		var l coordinationv1.Lease
		if harness.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: app.DefaultOptions().LeaderElectionID}, &l) != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	// A's lease is short (2 s, given up after 1.5 s), for B to take over
	// soon after the freeze: B waits out the lease A wrote. B's own is
	// long: B leading is not what is tested, and a renewal kube-apiserver
	// answers late on a loaded machine must not stop it, with no replica
	// left to sequence.
	a := startReplica(t, binary, kubeconfig, ns, "2s", "1500ms")
	require.True(t, waitFor(time.Minute, func() bool { return leaseHolder() != "" }), "replica A leads")
	first := leaseHolder()
	b := startReplica(t, binary, kubeconfig, ns, "30s", "20s")

	mark := time.Now()
	setVersion(t, ns, v2, keys(4)...)
	waitReleased(t, ns, "fe1")
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGSTOP))
	frozen := time.Now()

	fe2 := waitReleased(t, ns, "fe2")
	tookOver := time.Since(frozen)
	assert.NotEqual(t, first, leaseHolder(), "replica B holds the lease")
	t.Logf("from the freeze to the first release by the new leader (fe2): %s", tookOver.Round(time.Millisecond))

	time.Sleep(2 * time.Second) // the frozen leader's view grows older still
	require.NoError(t, a.cmd.Process.Signal(syscall.SIGCONT))
	select {
	case err := <-a.done:
		assert.Error(t, err, "the resumed replica stops, its lease lost")
		a.done <- err // for the cleanup
	case <-time.After(30 * time.Second):
		t.Errorf("the resumed replica did not step down within 30 s")
	}
	select {
	case err := <-b.done:
		t.Fatalf("replica B stopped: %v", err)
	default:
	}

	waitSettled(t, ns)
	eachAfterTheLast(t, ns, mark, "fe1", "fe2", "be", "fe3")
	assert.Equal(t, "fe1 fe2 be fe3", starts(ns, mark), "each node once, in order")
	now := node(ns, "fe2")
	require.NoError(t, harness.Client.Get(ctx, client.ObjectKeyFromObject(now), now))
	assert.Equal(t, fe2.GetGeneration(), now.GetGeneration(), "fe2's gate was not flipped back after its release")
}
