package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/medallia/express-sequencer/conformance"
)

// errConformanceFailed ends a run in which a clause failed: exit code 1,
// the report having said which.
var errConformanceFailed = errors.New("the operator failed the contract: see the report")

// errConformanceErrored ends a run in which no clause failed but the kit
// could not judge one (its access refused, the cluster not reached): exit
// code 1.
var errConformanceErrored = errors.New("the kit could not judge some clauses (its access, or the cluster; not the operator): see the report for why")

// errConformancePartial ends, with --require-all, a run in which a clause
// was skipped: exit code 1.
var errConformancePartial = errors.New("some clauses were skipped (--require-all): the run shows only part of the contract; see the report for why")

func newConformanceCommand(e *env) *cobra.Command {
	cfg := conformance.Config{}
	var output string
	var clauses []string
	var requireAll bool
	cmd := &cobra.Command{
		Use:   "conformance --namespace SCRATCH",
		Short: "Check the cluster's Express operator against the operator contract, clause by clause",
		Long: `Check the Express operator running in the cluster against the contract
express-sequencer's ordering rests on (docs/express-operator-contract.md).

Each clause creates a tenant of its own in the scratch namespace (a Backend
named after the clause; gate-only-hold adds a Frontend), drives changes to
it and judges what the operator does by reading the nodes, their
StatefulSets and their pods; the clauses run at the same time, and each
deletes its nodes when done (--keep leaves them). With express-sequencer
installed for the namespace its webhook stamps and gates each change;
without it the kit stamps the target hash itself, and the clauses that need
the sequencer (gate-only-hold, sequencer-release) are skipped, as they are in
a namespace express-sequencer audits (express.medallia.com/sequencing=audit).

Clauses:
` + clauseHelp() + `
The report lists every clause passed, failed (with what broke the rule: the
object and the moment), skipped (with why) or error (the kit could not
judge it: its own access refused — RBAC, a quota — the API server not
reached, the run cancelled; nothing said of the operator): a table, or -o
yaml (the shape of Gateway API's conformance reports, its summary's result
success, partial — a clause skipped, what it checks not shown — error or
failure) or -o junit (for CI; an error is a JUnit error). The exit code is
1 when a clause failed or could not be judged, or, with --require-all, was
skipped.`,
		Example: `  kubectl create namespace express-conformance
  kubectl express conformance -n express-conformance
  kubectl express conformance -n express-conformance --clause gates-hold --clause up-false --keep
  kubectl express conformance -n express-conformance --versions 7.1.0,7.2.0 --failing-version 0.0.0-does-not-exist -o junit > conformance.xml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch output {
			case "", "table", "yaml", "junit":
			default:
				return fmt.Errorf("--output %q: one of table, yaml, junit", output)
			}
			rc, err := e.flags.ToRESTConfig()
			if err != nil {
				return err
			}
			ns, _, err := e.flags.ToRawKubeConfigLoader().Namespace()
			if err != nil {
				return err
			}
			if ns == "" || !cmd.Flags().Changed("namespace") {
				return errors.New("give the scratch namespace the kit may create its nodes in: --namespace (-n)")
			}
			cfg.RESTConfig, cfg.Namespace, cfg.Clauses = rc, ns, clauses
			cfg.Progress = func(clause string, r *conformance.ClauseResult) {
				if r == nil {
					fmt.Fprintf(e.errOut, "%s: running\n", clause)
					return
				}
				fmt.Fprintf(e.errOut, "%s: %s in %s\n", clause, r.Result, r.Duration)
			}
			report, err := conformance.Check(contextOf(cmd), cfg)
			if err != nil {
				return err
			}
			switch output {
			case "yaml":
				data, err := report.YAML()
				if err != nil {
					return err
				}
				_, err = e.out.Write(data)
				if err != nil {
					return err
				}
			case "junit":
				data, err := report.JUnit()
				if err != nil {
					return err
				}
				if _, err := e.out.Write(data); err != nil {
					return err
				}
			default:
				if err := report.Table(e.out); err != nil {
					return err
				}
			}
			return conformanceExit(report, requireAll)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "table", "The report's format: table, yaml (Gateway API's conformance report shape) or junit (JUnit XML).")
	f.StringSliceVar(&clauses, "clause", nil, "Run only this clause (repeat, or comma-separated): "+strings.Join(conformance.Clauses(), ", ")+".")
	f.BoolVar(&requireAll, "require-all", false, "Fail (exit code 1) when a clause was skipped too (without express-sequencer installed, or without --failing-version): a partial run shows less than the contract.")
	f.BoolVar(&cfg.Keep, "keep", false, "Leave the kit's nodes (and so their pods) in the namespace, for a look after a failure.")
	versions := f.StringSlice("versions", []string{"conformance-1", "conformance-2"}, "Two expressVersion values the operator can run; the second is what changes roll out.")
	f.StringVar(&cfg.FailingVersion, "failing-version", "", "An expressVersion whose containers cannot start (an image that does not exist): runs the failing-pods clause, skipped without it.")
	f.StringVar(&cfg.UnactedField, "unacted-field", "conformanceProbe", "A string spec field the operator keeps but does not act on, a dotted path under spec (extensions.note): changing it must still roll the node, and the CRD clause writes it to see it kept.")
	f.DurationVar(&cfg.HoldWindow, "hold-window", 5*time.Second, "How long a gated node is watched for a pod the operator must not make.")
	f.DurationVar(&cfg.RolloutTimeout, "rollout-timeout", 2*time.Minute, "How long a rollout the operator must carry out may take.")
	f.DurationVar(&cfg.RecreateWithin, "recreate-within", 30*time.Second, "How soon a deleted pod must be back and Ready, counted from the old pod's disappearance (its grace period to stop, and any finalizer, are not counted).")
	f.StringVar(&cfg.Implementation.Project, "implementation", "", "The operator's name, for the report.")
	f.StringVar(&cfg.Implementation.Version, "implementation-version", "", "The operator's version, for the report.")
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if len(*versions) != 2 || (*versions)[0] == "" || (*versions)[1] == "" || (*versions)[0] == (*versions)[1] {
			return fmt.Errorf("--versions %v: two different versions, comma-separated", *versions)
		}
		cfg.Versions = [2]string{(*versions)[0], (*versions)[1]}
		return nil
	}
	return cmd
}

// conformanceExit is how a run ends: errConformanceFailed when a clause
// failed, errConformanceErrored when none did but one could not be judged;
// with requireAll, errConformancePartial when one was skipped.
func conformanceExit(report conformance.Report, requireAll bool) error {
	switch {
	case report.Failed():
		return errConformanceFailed
	case report.Errored():
		return errConformanceErrored
	case requireAll && report.Summary.Skipped > 0:
		return errConformancePartial
	}
	return nil
}

// clauseHelp lists every clause for --help: its id, its section, what it
// checks.
func clauseHelp() string {
	var b strings.Builder
	for _, id := range conformance.Clauses() {
		section, description, _ := conformance.Describe(id)
		fmt.Fprintf(&b, "  %-18s %s\n  %-18s %s\n", id, section, "", description)
	}
	return b.String()
}
