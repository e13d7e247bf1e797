package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/medallia/express-sequencer/internal/defaults"
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
}

func newRootCommand(in io.Reader, out, errOut io.Writer) *cobra.Command {
	e := &env{in: in, out: out, errOut: errOut, flags: genericclioptions.NewConfigFlags(true)}
	root := &cobra.Command{
		Use:   "kubectl-express",
		Short: "Explain and steer the rollout order of Express tenants",
		Long: `kubectl express shows how express-sequencer orders the rollout of an Express
tenant (one Backend and its Frontends) and why a node is or is not moving.

  kubectl express plan acme -n tenant-123634-prod      the tenant's nodes in order, who waits for whom
  kubectl express explain acme-fe2 -n tenant-123634-prod  why acme-fe2 is (not) moving and what would unblock it
  kubectl express defaults -f tenant.yaml              what the webhook would inject, offline
  kubectl express pause acme-fe2 / resume acme-fe2     hold a node (and everything after it), and let it go`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetIn(in)
	root.SetOut(out)
	root.SetErr(errOut)
	e.flags.AddFlags(root.PersistentFlags())
	root.PersistentFlags().StringVar(&e.orderConfig, "order-config", "",
		"The installation's order configuration file (as given to express-sequencer --order-config); empty uses the built-in orders.")
	root.AddCommand(newPlanCommand(e), newExplainCommand(e), newDefaultsCommand(e),
		newPauseCommand(e, true), newPauseCommand(e, false))
	return root
}

func (e *env) orders() (defaults.Orders, error) { return defaults.LoadOrders(e.orderConfig) }

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
