package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/medallia/express-sequencer/internal/sequencer"
)

func newStatusCommand(e *env) *cobra.Command {
	var all, stuck, watch bool
	var output, selector string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "The fleet at a glance: every tenant's progress, what rolls, what holds the next node",
		Long: `status reads every tenant of the namespace — of all namespaces with -A —
with one LIST per kind (Backends, Frontends, Express pods, StatefulSets;
and the machines pods run on, as the sequencer reads them: one LIST
with -A, by name in a namespace), decoding Backends and Frontends as they
stream, decides with the sequencer's own code, and prints one line per tenant: its
live nodes on target as a progress bar, its state, the nodes rolling now,
the next node and what holds it (reason and blocker, as explain names them),
and how long that node has had its reason (AGE; "-" until the sequencer has
written it). Stuck tenants (a dependency cycle, a prerequisite that does not
exist, a rollout past its progress deadline) come first, then held ones
(paused, settling, a change landing, a predecessor not Ready), rolling ones
and done ones. ORDER counts the tenant's nodes whose last finding of the
order auditor (their OrderKept condition) is a rollout out of order, or, in
audit mode, one enforcing would have held ("ok" for none; kubectl express
audit says what each was). A summary line counts the tenants shown, with
their nodes on target and out of order.

States:
  stuck    a node cannot go on by itself: kubectl express explain it
  held     a node waits (gated, or its pods held) and nothing is rolling
  rolling  a released rollout or a recovery is under way
  done     every live node is released and Ready on its target

-w reads each kind once into an informer that its watch keeps current (the
machines too, in a namespace as well), and prints the view again from there
after a change to a Backend, Frontend, Express pod, their StatefulSet or a
machine's readiness (0.1 s after the first change of a burst, 1 s with -A),
and every 15 s for holds that end with time alone: drawing it again costs
the API server nothing. It needs watch as well as list; a watch refused
ends it with the API server's answer. Bars are drawn in block characters
on a terminal, in ASCII otherwise.`,
		Example: `  kubectl express status -n tenant-123634-prod
  kubectl express status -A --stuck
  kubectl express status -A -l express.medallia.com/source-deployer=argocd -o wide
  kubectl express status -A -o json | jq '.summary'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "", "wide", "json", "yaml":
			default:
				return fmt.Errorf("-o %q: want wide, json or yaml", output)
			}
			sel, err := labels.Parse(selector)
			if err != nil {
				return fmt.Errorf("-l %q: %w", selector, err)
			}
			c, ns, err := e.client()
			if err != nil {
				return err
			}
			if all {
				ns = ""
			}
			cfg, err := e.flags.ToRESTConfig()
			if err != nil {
				return fmt.Errorf("loading kubeconfig: %w", err)
			}
			ctx := contextOf(cmd)
			orders, err := e.liveOrders(ctx, c)
			if err != nil {
				return err
			}
			var reader client.Reader
			events := make(chan struct{}, 1)
			var refused <-chan error
			if !watch {
				if reader, err = sequencer.FleetReader(cfg, c); err != nil {
					return err
				}
			} else {
				// The informers end when the command does.
				var cancel context.CancelFunc
				ctx, cancel = context.WithCancel(ctx)
				defer cancel()
				reader, refused, err = startFleetCache(ctx, cfg, c, ns, func() {
					select {
					case events <- struct{}{}:
					default:
					}
				})
				if err != nil {
					return err
				}
			}
			view := func(ctx context.Context) (string, error) {
				now := time.Now()
				f, err := e.readFleet(ctx, reader, ns, orders, sel, stuck, now)
				if err != nil {
					return "", err
				}
				return renderFleet(f, output, all, isTerminal(e.out), now)
			}
			text, err := view(ctx)
			if err != nil {
				return err
			}
			fmt.Fprint(e.out, text)
			if !watch {
				return nil
			}
			// A burst of changes settles first, across the cluster for a
			// second: one change prints once.
			settle := 100 * time.Millisecond
			if all {
				settle = time.Second
			}
			return e.redrawOn(ctx, events, refused, text, settle, 15*time.Second, view)
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "Every namespace's tenants.")
	cmd.Flags().BoolVar(&stuck, "stuck", false, "Only stuck tenants.")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Print the view again whenever a tenant changes, until interrupted.")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: wide (adds the next node's message), json or yaml.")
	cmd.Flags().StringVarP(&selector, "selector", "l", "", "Only tenants with a node matching this label selector (e.g. express.medallia.com/source-deployer=argocd).")
	return cmd
}

// isTerminal reports whether w is a terminal.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// barWidth is the cells of a progress bar.
const barWidth = 10

// bar draws done of total as a progress bar: block characters on a
// terminal, ASCII otherwise.
func bar(done, total int, tty bool) string {
	full, empty := "#", "."
	if tty {
		full, empty = "█", "░"
	}
	n := 0
	if total > 0 {
		n = done * barWidth / total
	}
	return "[" + strings.Repeat(full, n) + strings.Repeat(empty, barWidth-n) + "]"
}

// renderFleet prints the view: a table (wide adds the message) or the
// fleet as JSON or YAML.
func renderFleet(f fleet, output string, withNamespace, tty bool, now time.Time) (string, error) {
	switch output {
	case "json":
		data, err := json.MarshalIndent(f, "", "  ")
		return string(data) + "\n", err
	case "yaml":
		data, err := yaml.Marshal(f)
		return string(data), err
	}
	var buf bytes.Buffer
	if len(f.Tenants) == 0 {
		buf.WriteString("No tenants.\n")
	} else {
		tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
		header := []string{"TENANT", "PROGRESS", "STATE", "ROLLING", "NEXT", "REASON", "BLOCKER", "AGE", "ORDER"}
		if withNamespace {
			header = append([]string{"NAMESPACE"}, header...)
		}
		if output == "wide" {
			header = append(header, "MESSAGE")
		}
		fmt.Fprintln(tw, strings.Join(header, "\t"))
		for _, t := range f.Tenants {
			next, reason, blocker, message := "-", "-", "-", "-"
			if t.Next != nil {
				next, reason, message = t.Next.Node, t.Next.Reason, t.Next.Message
				if len(t.Next.WaitingFor) > 0 {
					blocker = strings.Join(t.Next.WaitingFor, ",")
				}
			}
			rolling := "-"
			if len(t.Rolling) > 0 {
				rolling = strings.Join(t.Rolling, ",")
			}
			age := "-"
			if t.Since != nil {
				age = duration.HumanDuration(now.Sub(*t.Since))
			}
			cells := []string{t.Tenant, fmt.Sprintf("%s %d/%d", bar(t.NodesOnTarget, t.LiveNodes, tty), t.NodesOnTarget, t.LiveNodes), t.State, rolling, next, reason, blocker, age, orderCell(t)}
			if withNamespace {
				cells = append([]string{t.Namespace}, cells...)
			}
			if output == "wide" {
				cells = append(cells, message)
			}
			fmt.Fprintln(tw, strings.Join(cells, "\t"))
		}
		if err := tw.Flush(); err != nil {
			return "", err
		}
		var off []string
		for _, t := range f.Tenants {
			for _, name := range t.NotRendered {
				off = append(off, t.Namespace+"/"+name)
			}
		}
		if len(off) > 0 {
			fmt.Fprintf(&buf, "\nNot in their chart's latest render (dropped from the values, not pruned; they hold no change): %s\n", strings.Join(off, ", "))
		}
	}
	s := f.Summary
	percent := 0
	if s.LiveNodes > 0 {
		percent = s.NodesOnTarget * 100 / s.LiveNodes
	}
	fmt.Fprintf(&buf, "\n%d tenants: %d stuck, %d held, %d rolling, %d done. Nodes on target %s %d/%d (%d%%). Out of order: %d nodes",
		s.Tenants, s.Stuck, s.Held, s.Rolling, s.Done, bar(s.NodesOnTarget, s.LiveNodes, tty), s.NodesOnTarget, s.LiveNodes, percent, s.OutOfOrder)
	if s.WouldHaveHeld > 0 {
		fmt.Fprintf(&buf, "; enforcing would have held %d", s.WouldHaveHeld)
	}
	buf.WriteString(".\n")
	return buf.String(), nil
}

// orderCell is the ORDER column: the tenant's nodes whose last finding of
// the order auditor is a violation, or would-have-held; "ok" for none.
func orderCell(t tenantStatus) string {
	var parts []string
	if t.OutOfOrder > 0 {
		parts = append(parts, fmt.Sprintf("%d out of order", t.OutOfOrder))
	}
	if t.WouldHaveHeld > 0 {
		parts = append(parts, fmt.Sprintf("%d would-hold", t.WouldHaveHeld))
	}
	if len(parts) == 0 {
		return "ok"
	}
	return strings.Join(parts, ",")
}
