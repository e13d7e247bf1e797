// Package conformance proves the operator conformance kit both ways on
// Kubernetes' own control loops (kube-controller-manager, kube-scheduler,
// KWOK) with express-sequencer's webhooks and sequencer installed: the kit
// passes against expressoperator, which does the contract's part, and
// each operator broken on purpose fails the clause it breaks, naming it in
// the report.
package conformance

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
)

var (
	harness *controlplane.Harness
	// broken is how the operator breaks the contract in each namespace
	// (not at all by default).
	broken sync.Map
)

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (int, error) {
	var err error
	if harness, err = controlplane.NewHarness(logr.Discard(), func(o *app.Options) { o.Grouping.SettleTime = 0 }); err != nil {
		return 0, err
	}
	defer func() { _ = harness.Stop() }()
	cluster, err := harness.StartCluster(2)
	if err != nil {
		return 0, err
	}
	defer func() { _ = cluster.Stop() }()
	op := &expressoperator.Operator{StartAfter: 50 * time.Millisecond, ReadyAfter: 200 * time.Millisecond,
		Broken: func(n v2alpha1.Node) expressoperator.Breakage {
			b, _ := broken.Load(n.GetNamespace())
			out, _ := b.(expressoperator.Breakage)
			return out
		}}
	stop, err := harness.StartController(op.SetupWithManager)
	if err != nil {
		return 0, err
	}
	defer stop()
	return m.Run(), nil
}

// namespace creates a scratch namespace whose operator breaks the contract
// as b says.
func namespace(t *testing.T, b expressoperator.Breakage) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "conformance-"}}
	require.NoError(t, harness.Client.Create(context.Background(), ns))
	broken.Store(ns.Name, b)
	return ns.Name
}
