package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/duration"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// auditReport is what kubectl express audit prints (-o json|yaml).
type auditReport struct {
	Since   time.Time     `json:"since"`
	Tenants []auditTenant `json:"tenants"`
	// EventsFrom is when the oldest of the auditor's Events still kept was
	// recorded; before it only each node's last finding is known.
	EventsFrom *time.Time `json:"eventsFrom,omitempty"`
	Summary    auditTotal `json:"summary"`
}

// auditTotal sums up the tenants shown.
type auditTotal struct {
	Tenants       int `json:"tenants"`
	NodeRollouts  int `json:"nodeRollouts"`
	InOrder       int `json:"inOrder"`
	Violations    int `json:"violations"`
	WouldHaveHeld int `json:"wouldHaveHeld"`
}

// auditTenant is one tenant's rollouts since --since.
type auditTenant struct {
	Namespace string `json:"namespace"`
	Tenant    string `json:"tenant"`
	// Mode is its namespace's sequencing mode.
	Mode string `json:"mode"`
	// NodeRollouts are the node rollouts its nodes record (gated or
	// released) since --since; InOrder those with no finding.
	NodeRollouts int            `json:"nodeRollouts"`
	InOrder      int            `json:"inOrder"`
	Findings     []auditFinding `json:"findings,omitempty"`
}

// auditFinding is one rollout the auditor found out of order, or that
// enforcing would have held.
type auditFinding struct {
	Node string    `json:"node"`
	Kind string    `json:"kind"` // OrderViolation or WouldHaveHeld
	At   time.Time `json:"at"`
	// Wait is how long enforcing would have held the node (WouldHaveHeld).
	Wait string `json:"wait,omitempty"`
	// WaitingFor is the prerequisite it waited for, as the sequencer named it.
	WaitingFor string `json:"waitingFor,omitempty"`
	// Recovery: a would-have-held of a recovering node's new pod, which
	// enforcing would have created scheduling-gated, not of a rollout.
	Recovery bool   `json:"recovery,omitempty"`
	Message  string `json:"message"`
	// From says where it was read: an Event, or the node's OrderKept
	// condition (its last finding, kept after Events expire).
	From string `json:"from"`
}

func newAuditCommand(e *env) *cobra.Command {
	var all bool
	var output, since string
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "What the order auditor saw: per tenant, the rollouts in order, the violations, and what enforcing would have held",
		Long: `audit reports, per tenant of the namespace (of all namespaces with -A),
what express-sequencer's order auditor found since --since: the node
rollouts its nodes record, how many kept the order, each violation (a pod
created while its node was gated, for a target it did not run: the Express
operator rolled a gated node, or a pod was made by hand), and, in audit
mode, each would-have-held — a node whose new target started while the
sequencer would still have held it, or a recovering node whose new pod
started that enforcing would have created scheduling-gated ("recovered",
recovery: true in -o json) — with how long enforcing would have held it and
the prerequisite it would have waited for. It is the report
to read before switching a namespace from audit to enforce
(docs/operations.md, "Audit first").

It reads only what the cluster keeps: the nodes' rollout records (their
release annotations and express.medallia.com/rollout-history, the current
rollout and the 5 before it), their OrderKept condition (each node's last
finding), and the auditor's Events (OrderViolation, WouldHaveHeld) while the
API server keeps them (its --event-ttl, 1h by default). Once Events have
expired, only each node's last finding is known: the report says from when
Events are kept. The live count is the auditor's metrics,
express_sequencer_order_violations_total and
express_sequencer_audit_would_hold_total.`,
		Example: `  kubectl express audit -n tenant-123634-prod
  kubectl express audit -A --since 7d
  kubectl express audit -A -o json | jq '.tenants[] | select(.findings)'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "", "json", "yaml":
			default:
				return fmt.Errorf("-o %q: want json or yaml", output)
			}
			window, err := parseSince(since)
			if err != nil {
				return fmt.Errorf("--since %q: %w", since, err)
			}
			c, ns, err := e.client()
			if err != nil {
				return err
			}
			if all {
				ns = ""
			}
			now := time.Now()
			r, err := readAudit(contextOf(cmd), c, ns, now.Add(-window))
			if err != nil {
				return err
			}
			text, err := renderAudit(r, output, now)
			if err != nil {
				return err
			}
			fmt.Fprint(e.out, text)
			return nil
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "Every namespace's tenants.")
	cmd.Flags().StringVar(&since, "since", "7d", "How far back to report: a duration such as 36h, or days such as 7d.")
	cmd.Flags().StringVarP(&output, "output", "o", "", "Output format: json or yaml.")
	return cmd
}

// parseSince reads a duration, with days (7d) besides Go's units.
func parseSince(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("want a positive number of days, such as 7d")
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a positive duration such as 36h or 7d")
	}
	return d, nil
}

// readAudit reads the tenants of ns (every namespace when empty), their
// namespaces' modes and the auditor's Events, and sums up what happened
// since from.
func readAudit(ctx context.Context, c client.Reader, ns string, from time.Time) (auditReport, error) {
	r := auditReport{Since: from.UTC()}
	tenants, err := readTenants(ctx, c, ns)
	if err != nil {
		return r, err
	}
	var namespaces corev1.NamespaceList
	modes := map[string]string{}
	if err := c.List(ctx, &namespaces); err == nil {
		for i := range namespaces.Items {
			// A namespace without the label has the installation's
			// default mode, which the plugin does not know: "default".
			if _, ok := namespaces.Items[i].Labels[v2alpha1.LabelSequencing]; ok {
				modes[namespaces.Items[i].Name] = sequencer.ModeOf(&namespaces.Items[i], "")
			}
		}
	}
	var events eventsv1.EventList
	opts := []client.ListOption{}
	if ns != "" {
		opts = append(opts, client.InNamespace(ns))
	}
	if err := c.List(ctx, &events, opts...); err != nil {
		return r, fmt.Errorf("listing the auditor's Events: %w", err)
	}
	byNode := map[string][]auditFinding{}
	for _, ev := range events.Items {
		if ev.ReportingController != v2alpha1.FieldManager || (ev.Reason != v2alpha1.ReasonOrderViolation && ev.Reason != v2alpha1.ReasonWouldHaveHeld) {
			continue
		}
		at := ev.EventTime.Time
		if ev.Series != nil {
			at = ev.Series.LastObservedTime.Time
		}
		if r.EventsFrom == nil || at.Before(*r.EventsFrom) {
			t := at.UTC()
			r.EventsFrom = &t
		}
		if at.Before(from) {
			continue
		}
		key := ev.Namespace + "/" + ev.Regarding.Name
		byNode[key] = append(byNode[key], findingOf(ev.Regarding.Name, ev.Reason, at, ev.Note, "Event"))
	}
	for _, t := range tenants {
		at := auditTenant{Namespace: t.Namespace, Tenant: t.ClusterName, Mode: cmp.Or(modes[t.Namespace], "default")}
		for _, n := range t.nodes {
			key := n.GetNamespace() + "/" + n.GetName()
			found := byNode[key]
			if c := meta.FindStatusCondition(n.NodeStatus().Conditions, v2alpha1.ConditionOrderKept); c != nil && c.Status == "False" && !c.LastTransitionTime.Time.Before(from) &&
				!slices.ContainsFunc(found, func(f auditFinding) bool { return f.Message == c.Message }) {
				found = append(found, findingOf(n.GetName(), c.Reason, c.LastTransitionTime.Time, c.Message, "condition "+v2alpha1.ConditionOrderKept))
			}
			rollouts := 0
			for _, rec := range append(rollout.HistoryIn(n), rollout.RecordOf(n)) {
				if began := cmp.Or(rec.Gated, rec.Released); !began.IsZero() && !began.Before(from) {
					rollouts++
				}
			}
			at.NodeRollouts += rollouts
			// A recovery is no rollout: its finding takes none from those in order.
			at.InOrder += max(0, rollouts-len(found)+countRecoveries(found))
			at.Findings = append(at.Findings, found...)
		}
		slices.SortFunc(at.Findings, func(a, b auditFinding) int { return a.At.Compare(b.At) })
		r.Tenants = append(r.Tenants, at)
		r.Summary.Tenants++
		r.Summary.NodeRollouts += at.NodeRollouts
		r.Summary.InOrder += at.InOrder
		for _, f := range at.Findings {
			if f.Kind == v2alpha1.ReasonOrderViolation {
				r.Summary.Violations++
			} else {
				r.Summary.WouldHaveHeld++
			}
		}
	}
	return r, nil
}

// countRecoveries counts the findings of recoveries.
func countRecoveries(found []auditFinding) int {
	n := 0
	for _, f := range found {
		if f.Recovery {
			n++
		}
	}
	return n
}

// tenantNodes are one tenant's nodes.
type tenantNodes struct {
	rollout.Tenant
	nodes []v2alpha1.Node
}

// readTenants lists the Backends and Frontends of ns (every namespace when
// empty) by tenant, sorted.
func readTenants(ctx context.Context, c client.Reader, ns string) ([]tenantNodes, error) {
	var bes v2alpha1.BackendList
	var fes v2alpha1.FrontendList
	if err := c.List(ctx, &bes, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing Backends: %w", err)
	}
	if err := c.List(ctx, &fes, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing Frontends: %w", err)
	}
	by := map[rollout.Tenant]*tenantNodes{}
	var out []*tenantNodes
	add := func(n v2alpha1.Node) {
		t := rollout.Tenant{Namespace: n.GetNamespace(), ClusterName: n.NodeSpec().ClusterConfig.ClusterName}
		if by[t] == nil {
			by[t] = &tenantNodes{Tenant: t}
			out = append(out, by[t])
		}
		by[t].nodes = append(by[t].nodes, n)
	}
	for i := range bes.Items {
		add(&bes.Items[i])
	}
	for i := range fes.Items {
		add(&fes.Items[i])
	}
	slices.SortFunc(out, func(a, b *tenantNodes) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.ClusterName, b.ClusterName))
	})
	tenants := make([]tenantNodes, len(out))
	for i, t := range out {
		tenants[i] = *t
	}
	return tenants, nil
}

var (
	heldFor    = regexp.MustCompile(`would have held it (?:scheduling-gated )?for (\S+) more`)
	recovered  = regexp.MustCompile(`^\S+ recovered: its new pod `)
	waitingFor = regexp.MustCompile(`waiting for (\S+ \((?:Backend|Frontend)\))`)
)

// findingOf reads a finding out of the auditor's words (audit.Describe).
func findingOf(node, reason string, at time.Time, message, from string) auditFinding {
	f := auditFinding{Node: node, Kind: reason, At: at.UTC(), Message: message, From: from}
	if m := heldFor.FindStringSubmatch(message); m != nil {
		f.Wait = m[1]
	}
	if m := waitingFor.FindStringSubmatch(message); m != nil {
		f.WaitingFor = m[1]
	}
	f.Recovery = recovered.MatchString(message)
	return f
}

// renderAudit prints the report: a table per tenant and the findings.
func renderAudit(r auditReport, output string, now time.Time) (string, error) {
	switch output {
	case "json":
		data, err := json.MarshalIndent(r, "", "  ")
		return string(data) + "\n", err
	case "yaml":
		data, err := yaml.Marshal(r)
		return string(data), err
	}
	var buf bytes.Buffer
	if len(r.Tenants) == 0 {
		buf.WriteString("No tenants.\n")
	} else {
		tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAMESPACE\tTENANT\tMODE\tNODE ROLLOUTS\tIN ORDER\tVIOLATIONS\tWOULD HAVE HELD")
		for _, t := range r.Tenants {
			v, w := 0, 0
			for _, f := range t.Findings {
				if f.Kind == v2alpha1.ReasonOrderViolation {
					v++
				} else {
					w++
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%d\n", t.Namespace, t.Tenant, t.Mode, t.NodeRollouts, t.InOrder, v, w)
		}
		_ = tw.Flush()
		for _, kind := range []string{v2alpha1.ReasonOrderViolation, v2alpha1.ReasonWouldHaveHeld} {
			title := "\nOrder violations (a pod created while its node was gated):\n"
			if kind == v2alpha1.ReasonWouldHaveHeld {
				title = "\nWould have held (where enforcing would change what happens):\n"
			}
			first := true
			tw := tabwriter.NewWriter(&buf, 0, 4, 2, ' ', 0)
			for _, t := range r.Tenants {
				for _, f := range t.Findings {
					if f.Kind != kind {
						continue
					}
					if first {
						buf.WriteString(title)
						fmt.Fprintln(tw, "  NODE\tWHEN\tWAIT\tWAITING FOR\tMESSAGE")
						first = false
					}
					fmt.Fprintf(tw, "  %s/%s\t%s ago\t%s\t%s\t%s\n", t.Namespace, f.Node, duration.HumanDuration(now.Sub(f.At)), cmp.Or(f.Wait, "-"), cmp.Or(f.WaitingFor, "-"), f.Message)
				}
			}
			_ = tw.Flush()
		}
	}
	s := r.Summary
	fmt.Fprintf(&buf, "\n%d tenants since %s: %d node rollouts, %d in order, %d violations, %d would have held.\n",
		s.Tenants, r.Since.Format(time.RFC3339), s.NodeRollouts, s.InOrder, s.Violations, s.WouldHaveHeld)
	switch {
	case r.EventsFrom == nil:
		buf.WriteString("No auditor Event is kept; findings come from each node's OrderKept condition (its last finding only).\n")
	case r.EventsFrom.After(r.Since):
		fmt.Fprintf(&buf, "Events are kept from %s only (the API server's --event-ttl): before that, each node's last finding (its OrderKept condition) is all that is known.\n",
			r.EventsFrom.Format(time.RFC3339))
	}
	return buf.String(), nil
}
