package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"github.com/medallia/express-sequencer/sequencer"
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
	cmd := &cobra.Command{
		Use:   "plan [TENANT]",
		Short: "Show a tenant's nodes in order: mode, gated or released, waiting for whom, and why",
		Long: `plan decides, with the sequencer's own code, what each node of a tenant may do
right now, and prints the nodes in provisioning order. TENANT is the
clusterConfig.clusterName; it may be left out when the namespace holds one
tenant. -o mermaid draws the provisioning and upgrade chains (down nodes
drawn as skipped).`,
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
			last := ""
			for {
				text, err := e.plan(cmd, tenant, output)
				if err != nil {
					return err
				}
				if text != last {
					if last != "" {
						fmt.Fprintf(e.out, "\n--- %s\n", time.Now().Format(time.TimeOnly))
					}
					fmt.Fprint(e.out, text)
					last = text
				}
				if !watch {
					return nil
				}
				select {
				case <-contextOf(cmd).Done():
					return nil
				case <-time.After(time.Second):
				}
			}
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "Output format: table, json, yaml or mermaid.")
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "Print the plan again whenever it changes, until interrupted.")
	return cmd
}

func (e *env) plan(cmd *cobra.Command, tenant, output string) (string, error) {
	c, ns, err := e.client()
	if err != nil {
		return "", err
	}
	orders, err := e.orders()
	if err != nil {
		return "", err
	}
	s, err := tenantSnapshot(contextOf(cmd), c, ns, tenant, orders)
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
func planRows(s *sequencer.Snapshot) []row {
	provAll, provLive := orderOf(s, s.Orders.Provisioning)
	_, upgLive := orderOf(s, s.Orders.Upgrade)
	decisions := map[string]sequencer.Decision{}
	for _, d := range sequencer.Plan(s) {
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
func mermaid(buf *bytes.Buffer, s *sequencer.Snapshot) {
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
