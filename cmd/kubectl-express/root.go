package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/scheme"
)

// version is set at build time: go build -ldflags "-X main.version=v0.2.0".
var version = "dev"

// env is what every subcommand shares: streams, kubectl's connection flags
// and the installation's default orders.
type env struct {
	in          io.Reader
	out, errOut io.Writer
	flags       *genericclioptions.ConfigFlags
	orderConfig string
	// sequencerNS is where the installation keeps its orders ConfigMap.
	sequencerNS string
	// grouping and progressDeadline are the installation's settings: what
	// the sequencer holds a tenant for, which a live plan must hold too.
	grouping         rollout.Grouping
	progressDeadline time.Duration
}

func newRootCommand(in io.Reader, out, errOut io.Writer) *cobra.Command {
	e := &env{in: in, out: out, errOut: errOut, flags: genericclioptions.NewConfigFlags(true),
		grouping: rollout.DefaultGrouping, progressDeadline: rollout.DefaultProgressDeadline}
	root := &cobra.Command{
		Use:   "kubectl-express",
		Short: "Explain and steer the rollout order of Express tenants",
		Long: `kubectl express shows how express-sequencer orders the rollout of an Express
tenant (one Backend and its Frontends) and why a node is or is not moving.

  kubectl express status -A                            every tenant's progress, what rolls, what holds the next node
  kubectl express plan acme -n tenant-123634-prod      the tenant's nodes in order, who waits for whom
  kubectl express explain acme-fe2 -n tenant-123634-prod  why acme-fe2 is (not) moving and what would unblock it
  kubectl express history acme -n tenant-123634-prod   its last rollouts, node by node, as a timeline (-o mermaid: a Gantt chart)
  kubectl express defaults -f tenant.yaml              what the webhook would inject, offline
  kubectl express pause acme-fe2 / resume acme-fe2     hold a node (and everything after it), and let it go
  kubectl express conformance -n express-conformance   check the cluster's Express operator against the operator contract

Every command exits 0 on success and 1 with a message on standard error
otherwise.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	e.flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&e.orderConfig, "order-config", "",
		"The installation's order configuration file (as given to express-sequencer --order-config). Empty: commands that read the cluster use the Helm chart's ConfigMap "+ordersConfigMap+" in --sequencer-namespace when it exists, the built-in orders otherwise; offline commands use the built-in orders.")
	root.PersistentFlags().StringVar(&e.sequencerNS, "sequencer-namespace", "express-sequencer-system", "The namespace express-sequencer is installed in, where its orders ConfigMap is read from.")
	pf := root.PersistentFlags()
	pf.DurationVar(&e.grouping.LandingTimeout, "landing-timeout", e.grouping.LandingTimeout, "The installation's express-sequencer --landing-timeout: a live plan holds a landing change as the sequencer does.")
	pf.DurationVar(&e.grouping.SettleTime, "settle-time", e.grouping.SettleTime, "The installation's express-sequencer --settle-time: a live plan holds changes without a new rollout-id as the sequencer does.")
	pf.DurationVar(&e.grouping.SettleCap, "settle-cap", e.grouping.SettleCap, "The installation's express-sequencer --settle-cap.")
	pf.DurationVar(&e.progressDeadline, "progress-deadline", e.progressDeadline, "The installation's express-sequencer --progress-deadline: a live plan reports a rollout stuck as the sequencer does.")
	root.AddCommand(newAuditCommand(e), newPlanCommand(e), newExplainCommand(e), newDefaultsCommand(e),
		newPauseCommand(e, true), newPauseCommand(e, false), newStatusCommand(e), newHistoryCommand(e), newConformanceCommand(e))
	return root
}

func (e *env) orders() (defaults.Orders, error) { return defaults.LoadOrders(e.orderConfig) }

// ordersConfigMap is the ConfigMap the Helm chart keeps the installation's
// orders in (its values' orders), under key orders.yaml.
const ordersConfigMap = "express-sequencer-orders"

// liveOrders returns the installation's default orders for a command that
// reads the cluster: --order-config when given; else the chart's orders
// ConfigMap in --sequencer-namespace when it exists; else the built-in
// orders, which an installation without custom orders runs with. A
// ConfigMap this user may not read is said on standard error, not hidden.
func (e *env) liveOrders(ctx context.Context, c client.Reader) (defaults.Orders, error) {
	if e.orderConfig != "" {
		return e.orders()
	}
	var cm corev1.ConfigMap
	err := c.Get(ctx, client.ObjectKey{Namespace: e.sequencerNS, Name: ordersConfigMap}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return defaults.Builtin(), nil
	case apierrors.IsForbidden(err):
		fmt.Fprintf(e.errOut, "Using the built-in orders: may not read ConfigMap %s/%s; give the installation's with --order-config\n", e.sequencerNS, ordersConfigMap)
		return defaults.Builtin(), nil
	case err != nil:
		return defaults.Orders{}, fmt.Errorf("reading the installation's orders, ConfigMap %s/%s: %w", e.sequencerNS, ordersConfigMap, err)
	}
	data, ok := cm.Data["orders.yaml"]
	if !ok {
		return defaults.Orders{}, fmt.Errorf("ConfigMap %s/%s has no key orders.yaml", e.sequencerNS, ordersConfigMap)
	}
	o, err := defaults.ParseOrders([]byte(data))
	if err != nil {
		return defaults.Orders{}, fmt.Errorf("ConfigMap %s/%s: %w", e.sequencerNS, ordersConfigMap, err)
	}
	return o, nil
}

// liveSnapshot reads a tenant as tenantSnapshot does, with the installation's
// progress deadline and change grouping: as the sequencer plans it now (a
// preview plans without them: as if the change had landed).
func (e *env) liveSnapshot(ctx context.Context, c client.Reader, ns, cluster string, orders defaults.Orders) (*rollout.Snapshot, error) {
	return tenantSnapshot(ctx, c, ns, cluster, orders, e.progressDeadline, e.grouping)
}

func (e *env) client() (client.Client, string, error) {
	cfg, err := e.flags.ToRESTConfig()
	if err != nil {
		return nil, "", fmt.Errorf("loading kubeconfig: %w", err)
	}
	ns, _, err := e.flags.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return nil, "", fmt.Errorf("finding the namespace: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, "", err
	}
	return c, ns, nil
}

func contextOf(cmd *cobra.Command) context.Context {
	if ctx := cmd.Context(); ctx != nil {
		return ctx
	}
	return context.Background()
}
