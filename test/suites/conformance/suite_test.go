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
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/internal/testing/expressoperator"
)

var (
	harness *controlplane.Harness
	// broken is how the operator breaks the contract in each namespace.
	broken expressoperator.PerNamespace
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
	if err := excludeFromWebhooks(context.Background()); err != nil {
		return 0, err
	}
	op := &expressoperator.Operator{StartAfter: 50 * time.Millisecond, ReadyAfter: 200 * time.Millisecond,
		Broken: broken.Of}
	stop, err := harness.StartController(op.SetupWithManager)
	if err != nil {
		return 0, err
	}
	defer stop()
	return m.Run(), nil
}

// namespace creates a scratch namespace whose operator breaks the contract
// as b says, with labels (set to "true").
func namespace(t *testing.T, b expressoperator.Breakage, labels ...string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "conformance-", Labels: map[string]string{}}}
	for _, l := range labels {
		ns.Labels[l] = "true"
	}
	require.NoError(t, harness.Client.Create(context.Background(), ns))
	broken.Set(ns.Name, b)
	return ns.Name
}

// withoutSequencer labels a namespace that express-sequencer's webhooks
// leave alone (a namespaceSelector, as an installation scoped to some
// namespaces has): there the kit runs as on a cluster without
// express-sequencer.
const withoutSequencer = "conformance.example.com/without-sequencer"

// excludeFromWebhooks gives every webhook of the control plane a
// namespaceSelector that leaves out the namespaces labelled
// withoutSequencer.
func excludeFromWebhooks(ctx context.Context) error {
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: withoutSequencer, Operator: metav1.LabelSelectorOpDoesNotExist}}}
	var m admissionregistrationv1.MutatingWebhookConfigurationList
	if err := harness.Client.List(ctx, &m); err != nil {
		return err
	}
	for i := range m.Items {
		for j := range m.Items[i].Webhooks {
			m.Items[i].Webhooks[j].NamespaceSelector = sel
		}
		if err := harness.Client.Update(ctx, &m.Items[i]); err != nil {
			return err
		}
	}
	var v admissionregistrationv1.ValidatingWebhookConfigurationList
	if err := harness.Client.List(ctx, &v); err != nil {
		return err
	}
	for i := range v.Items {
		for j := range v.Items[i].Webhooks {
			v.Items[i].Webhooks[j].NamespaceSelector = sel
		}
		if err := harness.Client.Update(ctx, &v.Items[i]); err != nil {
			return err
		}
	}
	return nil
}
