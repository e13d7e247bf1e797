package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/medallia/express-sequencer/internal/rollout"
)

func newHistoryCommand(e *env) *cobra.Command {
	var output string
	var last, pick int
	cmd := &cobra.Command{
		Use:   "history [TENANT]",
		Short: "A tenant's last rollouts, node by node: gated, released, Ready on target, after whom",
		Long: `history shows a tenant's last rollouts, newest first, each node in the order
it rolled: when it was gated for its new target, released, and Ready on it;
how long it waited and rolled; whose converged rollouts its release relied
on (AFTER); and, for the rollout under way, where each node stands now
(reason and blocker, as explain names them). A timeline draws each node's
wait and rollout, and the sequencer's Events about the rollout's nodes
follow while the API server keeps them.

TENANT is the clusterConfig.clusterName; it may be left out when the
namespace holds one tenant. A rollout is a change of the tenant: the nodes
of one rollout-id, or, without one, the nodes gated before the change's
first release (the sequencer holds such changes together until then).

What is kept, and for how long: the times and the AFTER record are kept on
the nodes themselves — the current rollout in their release annotations
and condition, the last 5 before it in annotation
express.medallia.com/rollout-history, written by the admission webhook
when a new target replaces a rollout — so they outlive Events. Events,
with the reasons each node waited for, last only as long as the API
server keeps them (its --event-ttl, 1h by default). READY is when the
sequencer last recorded the node Ready on that target: a crash and recovery
after the rollout move it. A rollout released before this version of
express-sequencer has no release time.

-o mermaid draws the newest rollout shown (or --rollout N) as a Mermaid
Gantt chart, a row per node, for a postmortem.`,
		Example: `  kubectl express history acme -n tenant-123634-prod
  kubectl express history acme -n tenant-123634-prod --last 1 -o json | jq '.rollouts[0].nodes[] | {node, released, ready}'
  kubectl express history acme -n tenant-123634-prod -o mermaid > rollout.mmd`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "", "json", "yaml", "mermaid":
			default:
				return fmt.Errorf("-o %q: want json, yaml or mermaid", output)
			}
			if last < 1 {
				return fmt.Errorf("--last %d: want 1 or more", last)
			}
			if pick < 0 {
				return fmt.Errorf("--rollout %d: want 1 (the newest) or more", pick)
			}
			tenant := ""
			if len(args) == 1 {
				tenant = args[0]
			}
			c, ns, err := e.client()
			if err != nil {
				return err
			}
			ctx := contextOf(cmd)
			orders, err := e.liveOrders(ctx, c)
			if err != nil {
				return err
			}
			s, err := tenantSnapshot(ctx, c, ns, tenant, orders, e.progressDeadline, e.grouping)
			if err != nil {
				return err
			}
			now := time.Now()
			rollouts := rollout.HistoryOf(s, rollout.Plan(s))
			var events eventsv1.EventList
			if err := c.List(ctx, &events, client.InNamespace(ns)); err != nil && !apierrors.IsForbidden(err) {
				return fmt.Errorf("listing the Events of namespace %s: %w", ns, err)
			} else if err != nil {
				fmt.Fprintf(e.errOut, "Showing no Events: may not list events.events.k8s.io in %s\n", ns)
			}
			nodes := map[string]bool{}
			for name := range s.Nodes {
				nodes[name] = true
			}
			h := history{Namespace: ns, Tenant: s.Tenant.ClusterName, Rollouts: []rolloutHistory{}}
			for i, list := range eventsOf(rollouts, nodes, events.Items) {
				h.Rollouts = append(h.Rollouts, marked(rolloutHistory{TenantRollout: rollouts[i], Events: list}))
			}
			switch {
			case pick > len(h.Rollouts):
				return fmt.Errorf("--rollout %d: %s in %s has %d rollouts recorded", pick, h.Tenant, ns, len(h.Rollouts))
			case pick > 0:
				h.Rollouts = h.Rollouts[pick-1 : pick]
			case output == "mermaid":
				h.Rollouts = h.Rollouts[:min(1, len(h.Rollouts))]
			default:
				h.Rollouts = h.Rollouts[:min(last, len(h.Rollouts))]
			}
			switch output {
			case "json":
				data, err := json.MarshalIndent(h, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintln(e.out, string(data))
			case "yaml":
				data, err := yaml.Marshal(h)
				if err != nil {
					return err
				}
				fmt.Fprint(e.out, string(data))
			case "mermaid":
				if len(h.Rollouts) == 0 {
					return fmt.Errorf("no rollouts recorded for %s in %s", h.Tenant, ns)
				}
				fmt.Fprint(e.out, mermaidGantt(h, h.Rollouts[0], now))
			default:
				fmt.Fprint(e.out, renderHistory(h, isTerminal(e.out), now))
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json, yaml, or mermaid (a Gantt chart of one rollout).")
	cmd.Flags().IntVar(&last, "last", 3, "How many rollouts to show, newest first.")
	cmd.Flags().IntVar(&pick, "rollout", 0, "Show only the Nth newest rollout (1: the newest).")
	return cmd
}
