package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// row is one node of a plan.
type row struct {
	Node         string   `json:"node"`
	Kind         string   `json:"kind"`
	Up           bool     `json:"up"`
	Provisioning int      `json:"provisioningPosition,omitempty"`
	Upgrade      int      `json:"upgradePosition,omitempty"`
	Mode         string   `json:"mode,omitempty"`
	Gated        bool     `json:"gated"`
	Reason       string   `json:"reason"`
	WaitingFor   []string `json:"waitingFor,omitempty"`
	Message      string   `json:"message"`
}

func newPlanCommand(e *env) *cobra.Command {
	var output string
	var watch bool
	var p previewOptions
	cmd := &cobra.Command{
		Use:   "plan [TENANT] [-f FILE|-]...",
		Short: "Show a tenant's nodes in order, or predict the order a proposed change would roll out in",
		Long: `plan decides, with the sequencer's own code, what each node of a tenant may do
right now, and prints the nodes in provisioning order. TENANT is the
clusterConfig.clusterName; it may be left out when the namespace holds one
tenant. -o mermaid draws the provisioning and upgrade chains (down nodes
drawn as skipped).

With -f, plan predicts instead the order in which a proposed change — the
tenant's manifests as they would be applied, e.g. from helm template — would
be rolled out: each manifest is admitted by the API server in a dry run
(through express-sequencer's webhooks) over the live tenant, then the
sequencer's own Plan runs as if every node it releases became Ready on its
target at once. Nothing is changed in the cluster.

--offline needs no cluster: the manifests are admitted with the webhooks'
own code, over the --current manifests (every node taken as Ready on them),
or as a new tenant without --current. For chart CI: render the values before
and after the change and compare. A prediction with nodes that can never be
released lists them under "stuck"; plan still exits 0, so CI checks it with
-o json | jq -e '.stuck == null'.

A live plan and a prediction use the installation's orders (its Helm chart's
ConfigMap, or --order-config). A live plan holds changes as the
installation's sequencer does only with its change-grouping settings: see
--landing-timeout, --settle-time, --settle-cap and --progress-deadline
(kubectl express --help).`,
		Example: `  kubectl express plan acme -n tenant-123634-prod
  helm template charts/express-tenant -f new-values.yaml | kubectl express plan acme -f -
  kubectl express plan --offline --current before.yaml -f after.yaml -o mermaid`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch output {
			case "table", "json", "yaml", "mermaid":
			default:
				return fmt.Errorf("-o %q: want table, json, yaml or mermaid", output)
			}
			tenant := ""
			if len(args) == 1 {
				tenant = args[0]
			}
			if len(p.files) > 0 || p.offline {
				if watch {
					return fmt.Errorf("-w watches the live tenant; it does not go with -f")
				}
				if p.offline && len(p.files) == 0 {
					return fmt.Errorf("--offline predicts from manifests: give them with -f")
				}
				p.output = output
				text, err := e.preview(contextOf(cmd), tenant, p)
				if err != nil {
					return err
				}
				fmt.Fprint(e.out, text)
				return nil
			}
			if len(p.current) > 0 {
				return fmt.Errorf("--current goes with --offline and -f")
			}
			c, ns, err := e.client()
			if err != nil {
				return err
			}
			orders, err := e.liveOrders(contextOf(cmd), c) // once: -w plans again on every change
			if err != nil {
				return err
			}
			text, err := e.plan(contextOf(cmd), c, ns, tenant, output, orders)
			if err != nil {
				return err
			}
			fmt.Fprint(e.out, text)
			if !watch {
				return nil
			}
			return e.watchPlan(contextOf(cmd), ns, text, 100*time.Millisecond, 15*time.Second, func(ctx context.Context) (string, error) {
				return e.plan(ctx, c, ns, tenant, output, orders)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "Output format: table, json, yaml or mermaid.")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Print the plan again whenever it changes, until interrupted.")
	cmd.Flags().StringArrayVarP(&p.files, "filename", "f", nil, "Predict the order of the change these manifests make: files, directories or URLs (repeatable); - reads standard input.")
	cmd.Flags().BoolVarP(&p.recursive, "recursive", "R", false, "Read the directories given with -f (and --current) recursively.")
	cmd.Flags().BoolVar(&p.offline, "offline", false, "Predict without a cluster, from --current (or a new tenant).")
	cmd.Flags().StringArrayVar(&p.current, "current", nil, "With --offline: the tenant's manifests as they run now (repeatable).")
	return cmd
}

func (e *env) plan(ctx context.Context, c client.Reader, ns, tenant, output string, orders defaults.Orders) (string, error) {
	s, err := e.liveSnapshot(ctx, c, ns, tenant, orders)
	if err != nil {
		return "", err
	}
	rows := planRows(s)
	var buf bytes.Buffer
	switch output {
	case "json":
		data, err := json.MarshalIndent(rows, "", "  ")
		if err != nil {
			return "", err
		}
		buf.Write(append(data, '\n'))
	case "yaml":
		data, err := yaml.Marshal(rows)
		if err != nil {
			return "", err
		}
		buf.Write(data)
	case "mermaid":
		mermaid(&buf, s)
	default:
		fmt.Fprintf(&buf, "Tenant %s in namespace %s\n", s.Tenant.ClusterName, s.Tenant.Namespace)
		w := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "NODE\tKIND\tUP\tPROVISION\tUPGRADE\tMODE\tGATED\tREASON\tWAITING FOR\tMESSAGE")
		for _, r := range rows {
			fmt.Fprintf(w, "%s\t%s\t%v\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Node, r.Kind, r.Up, position(r.Provisioning), position(r.Upgrade),
				dash(r.Mode), yesNo(r.Gated), r.Reason, dash(strings.Join(r.WaitingFor, ", ")), r.Message)
		}
		w.Flush()
	}
	return buf.String(), nil
}

// planRows plans the tenant and lists its nodes in provisioning order, then
// any node that has no place in the order.
func planRows(s *rollout.Snapshot) []row {
	provAll, provLive := orderOf(s, s.Orders.Provisioning)
	_, upgLive := orderOf(s, s.Orders.Upgrade)
	decisions := map[string]rollout.Decision{}
	for _, d := range rollout.Plan(s) {
		decisions[d.Node] = d
	}
	names := provAll
	for name := range s.Nodes {
		if !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	rows := make([]row, 0, len(names))
	for _, name := range names {
		n, d := s.Nodes[name], decisions[name]
		rows = append(rows, row{
			Node: name, Kind: n.NodeKind(), Up: n.NodeSpec().IsUp(),
			Provisioning: slices.Index(provLive, name) + 1, Upgrade: slices.Index(upgLive, name) + 1,
			Mode: string(d.Mode), Gated: d.Gated, Reason: d.Condition.Reason, WaitingFor: d.WaitingFor, Message: d.Condition.Message,
		})
	}
	return rows
}

// mermaid draws the provisioning and upgrade chains; intentionally-down
// nodes are drawn dashed and skipped over.
func mermaid(buf *bytes.Buffer, s *rollout.Snapshot) {
	fmt.Fprintf(buf, "flowchart LR\n")
	for _, chain := range []struct {
		id, title string
		all       func() ([]string, []string)
	}{
		{"p", "provisioning", func() ([]string, []string) { return orderOf(s, s.Orders.Provisioning) }},
		{"u", "upgrade", func() ([]string, []string) { return orderOf(s, s.Orders.Upgrade) }},
	} {
		all, live := chain.all()
		fmt.Fprintf(buf, "  subgraph %s[%s order]\n", chain.id, chain.title)
		for _, name := range all {
			class := "live"
			label := name
			if !slices.Contains(live, name) {
				class, label = "skipped", name+" (down, skipped)"
			}
			fmt.Fprintf(buf, "    %s_%s[\"%s\"]:::%s\n", chain.id, id(name), label, class)
		}
		prev := ""
		for _, name := range all {
			if prev != "" && !slices.Contains(live, name) {
				fmt.Fprintf(buf, "    %s_%s -.- %s_%s\n", chain.id, id(prev), chain.id, id(name))
				continue
			}
			if prev != "" {
				fmt.Fprintf(buf, "    %s_%s --> %s_%s\n", chain.id, id(prev), chain.id, id(name))
			}
			prev = name
		}
		fmt.Fprintf(buf, "  end\n")
	}
	fmt.Fprintf(buf, "  classDef live fill:#e0f2fe,stroke:#0369a1\n")
	fmt.Fprintf(buf, "  classDef skipped fill:#f4f4f5,stroke:#a1a1aa,stroke-dasharray: 5 5,color:#71717a\n")
}

func id(name string) string { return strings.NewReplacer("-", "_", ".", "_").Replace(name) }

func position(p int) string {
	if p == 0 {
		return "-"
	}
	return strconv.Itoa(p)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "gated"
	}
	return "released"
}
