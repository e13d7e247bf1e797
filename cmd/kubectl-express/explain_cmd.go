package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

func newExplainCommand(e *env) *cobra.Command {
	return &cobra.Command{
		Use:   "explain NODE|TYPE/NODE",
		Short: "Say why a node is (not) moving, the chain it waits on, and what would unblock it",
		Long: `explain reads the node's namespace straight from the API server (its
Backends, Frontends, Express pods and StatefulSets: the reads the sequencer
releases on; view permission is enough), decides with the sequencer's own
code, and prints what the node is, what holds it, the chain of nodes it waits
on to the one that does not move, and what would let it go. NODE is the
node's name, or TYPE/NAME (backend/acme-be, frontend/acme-fe2).

It uses the installation's orders (its Helm chart's ConfigMap, or
--order-config), and decides as the installation's sequencer does only with
its change-grouping settings: see --landing-timeout, --settle-time,
--settle-cap and --progress-deadline (kubectl express --help).`,
		Example: `  kubectl express explain acme-fe4 -n tenant-123634-prod
  kubectl express explain frontend/acme-fe4 -n tenant-123634-prod --order-config orders.yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := e.client()
			if err != nil {
				return err
			}
			orders, err := e.liveOrders(contextOf(cmd), c)
			if err != nil {
				return err
			}
			n, err := getNode(cmd, c, ns, args[0])
			if err != nil {
				return err
			}
			s, err := e.liveSnapshot(contextOf(cmd), c, ns, n.NodeSpec().ClusterConfig.ClusterName, orders)
			if err != nil {
				return err
			}
			explain(e, s, n.GetName())
			return nil
		},
	}
}

// loopsLine is explain's line on a plan that cut its loop searches short,
// empty for one that did not (Decision.LoopsUnsure).
func loopsLine(d rollout.Decision) string {
	why := map[string]string{
		rollout.LoopsOutOfBudget: "the plan's searches ran out of their budget: every wait is kept, and a crashed node on a loop does not go first",
		rollout.LoopsOutOfSteps:  "a search ran out of its steps: that wait is kept",
	}[d.LoopsUnsure]
	if why == "" {
		return ""
	}
	return fmt.Sprintf("  loops:   the tenant's lists make more wait-for loops than one plan searches (%s); a rollout in flight's new pods wait for its predecessors\n", why)
}

func explain(e *env, s *rollout.Snapshot, name string) {
	decisions := map[string]rollout.Decision{}
	for _, d := range rollout.Plan(s) {
		decisions[d.Node] = d
	}
	n, d := s.Nodes[name], decisions[name]
	spec := n.NodeSpec()
	ready, onTarget := 0, 0
	for _, p := range s.Pods[name] {
		if p.Conditions[string(corev1.PodReady)] == string(corev1.ConditionTrue) {
			ready++
			if p.Hash == n.GetAnnotations()[v2alpha1.AnnotationTargetHash] ||
				p.Hash == "" && p.Version == spec.ExpressVersion && p.Revision == spec.DeploymentRevision {
				onTarget++
			}
		}
	}
	fmt.Fprintf(e.out, "%s %s, tenant %s in namespace %s\n", n.NodeKind(), name, s.Tenant.ClusterName, s.Tenant.Namespace)
	fmt.Fprintf(e.out, "  target:  %s%s; up: %v\n", spec.ExpressVersion, revision(spec.DeploymentRevision), spec.IsUp())
	fmt.Fprintf(e.out, "  pods:    %d, %d Ready, %d Ready on target\n", len(s.Pods[name]), ready, onTarget)
	if c := meta.FindStatusCondition(n.NodeStatus().Conditions, v2alpha1.ConditionPrerequisitesReady); c != nil {
		fmt.Fprintf(e.out, "  sequencer says: %s (%s): %s\n", c.Reason, c.Status, c.Message)
	}
	state := "released"
	if d.Gated {
		state = "gated"
	}
	mode := ""
	if d.Mode != "" {
		mode = ", " + string(d.Mode) + " mode"
	}
	fmt.Fprintf(e.out, "  now:     %s%s: %s: %s\n", state, mode, d.Condition.Reason, d.Condition.Message)
	fmt.Fprint(e.out, loopsLine(d))
	if len(d.WaitingFor) == 0 {
		switch {
		case d.Gated && d.Condition.Reason == v2alpha1.ReasonRolloutPaused:
			fmt.Fprintf(e.out, "\nIt is held by its own annotation; remove %s to let it go.\n", v2alpha1.AnnotationPauseRollout)
		case d.Gated:
			fmt.Fprintf(e.out, "\nNo node holds it; %s does, as the line above says.\n", d.Condition.Reason)
		default:
			fmt.Fprintln(e.out, "\nNothing holds it.")
		}
		return
	}
	fmt.Fprintf(e.out, "  waits for: %s\n", strings.Join(d.WaitingFor, ", "))
	chain := []string{name}
	for cur := d; len(cur.WaitingFor) > 0; {
		next := cur.WaitingFor[len(cur.WaitingFor)-1]
		if slices.Contains(chain, next) {
			chain = append(chain, next+" (loop)")
			break
		}
		chain = append(chain, next)
		cur = decisions[next]
		if cur.Node == "" {
			break
		}
	}
	fmt.Fprintf(e.out, "  chain:   %s\n", strings.Join(chain, " → "))
	last := strings.TrimSuffix(chain[len(chain)-1], " (loop)")
	end, ok := decisions[last]
	fmt.Fprintln(e.out, "\nWhat would unblock it:")
	switch {
	case !ok:
		fmt.Fprintf(e.out, "  - %s does not exist: create it, or change the prerequisite that names it\n", last)
	case end.Gated:
		fmt.Fprintf(e.out, "  - %s is held (%s): %s\n", last, end.Condition.Reason, end.Condition.Message)
	default:
		fmt.Fprintf(e.out, "  - %s finishing its rollout: it is released and must become Ready on its target\n", last)
	}
	fmt.Fprintf(e.out, "  - or, to go now regardless: kubectl annotate %s %s %s=true\n", strings.ToLower(n.NodeKind()), name, v2alpha1.AnnotationIgnorePrerequisites)
}

func revision(r string) string {
	if r == "" {
		return ""
	}
	return " revision " + r
}
