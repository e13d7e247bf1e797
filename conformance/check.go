package conformance

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// clause is one rule of the contract the kit checks.
type clause struct {
	id, section, description string
	// needsSequencer: the clause is skipped without express-sequencer.
	needsSequencer bool
	// skip, when set, says why the clause cannot run with cfg ("" when it
	// can).
	skip func(cfg Config) string
	// check drives the clause's node and returns what broke the rule.
	check func(ctx context.Context, p *probe) error
}

// Clauses lists the ids of every clause, in the order a report lists them.
func Clauses() []string {
	out := make([]string, len(clauses))
	for i, c := range clauses {
		out[i] = c.id
	}
	return out
}

// Describe returns the section and the description of clause id, and
// false when there is no such clause.
func Describe(id string) (section, description string, ok bool) {
	for _, c := range clauses {
		if c.id == id {
			return c.section, c.description, true
		}
	}
	return "", "", false
}

// Check runs the clauses of cfg against the operator of the cluster cfg
// reaches and returns the report. An error means the kit could not run (no
// such namespace, a clause id it does not know, the cluster unreachable),
// not that the operator failed a clause: the report says that.
func Check(ctx context.Context, cfg Config) (Report, error) {
	cfg = cfg.withDefaults()
	if cfg.RESTConfig == nil {
		return Report{}, errors.New("no cluster to check: Config.RESTConfig is nil")
	}
	if cfg.Namespace == "" {
		return Report{}, errors.New("no scratch namespace: Config.Namespace is empty")
	}
	selected, err := selectClauses(cfg.Clauses)
	if err != nil {
		return Report{}, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return Report{}, err
	}
	c, err := client.New(cfg.RESTConfig, client.Options{Scheme: scheme})
	if err != nil {
		return Report{}, fmt.Errorf("connecting to the cluster: %w", err)
	}
	if err := c.Get(ctx, client.ObjectKey{Name: cfg.Namespace}, &corev1.Namespace{}); err != nil {
		return Report{}, fmt.Errorf("reading the scratch namespace %s (create it first): %w", cfg.Namespace, err)
	}
	mode, err := sequencerInstalled(ctx, c, cfg)
	if err != nil {
		return Report{}, err
	}
	report := newReport(cfg, time.Now())
	report.Mode = mode
	results := make([]ClauseResult, len(selected))
	var g errgroup.Group
	var progress sync.Mutex
	for i, cl := range selected {
		g.Go(func() error {
			if cfg.Progress != nil {
				progress.Lock()
				cfg.Progress(cl.id, nil)
				progress.Unlock()
			}
			results[i] = runClause(ctx, c, cfg, cl, mode)
			if cfg.Progress != nil {
				progress.Lock()
				cfg.Progress(cl.id, &results[i])
				progress.Unlock()
			}
			return nil
		})
	}
	_ = g.Wait()
	for _, r := range results {
		report.add(r)
	}
	return report, ctx.Err()
}

// selectClauses returns the clauses called ids, every clause when there
// are none.
func selectClauses(ids []string) ([]clause, error) {
	if len(ids) == 0 {
		return clauses, nil
	}
	var out []clause
	for _, c := range clauses {
		if slices.Contains(ids, c.id) {
			out = append(out, c)
		}
	}
	for _, id := range ids {
		if !slices.ContainsFunc(clauses, func(c clause) bool { return c.id == id }) {
			return nil, fmt.Errorf("no clause %q: the clauses are %s", id, strings.Join(Clauses(), ", "))
		}
	}
	return out, nil
}

// sequencerInstalled says how express-sequencer's admission webhook treats
// the nodes of the namespace: a dry-run create comes back with a target
// hash where it is installed, and gated too where the namespace enforces.
func sequencerInstalled(ctx context.Context, c client.Client, cfg Config) (string, error) {
	p := &probe{c: c, cfg: cfg, ns: cfg.Namespace, name: "probe-be"}
	u := p.newNode(cfg.Versions[0])
	if err := c.Create(ctx, u, client.DryRunAll); err != nil {
		return "", fmt.Errorf("creating a %s in %s (dry run): %w", u.GetKind(), cfg.Namespace, err)
	}
	switch {
	case u.GetAnnotations()[v2alpha1.AnnotationTargetHash] == "":
		return ModeWithoutSequencer, nil
	case !slices.Contains(gates(u), v2alpha1.GateSequencer):
		return ModeSequencerAudits, nil
	}
	return ModeWithSequencer, nil
}

// runClause runs one clause on a node of its own and cleans up after it.
func runClause(ctx context.Context, c client.Client, cfg Config, cl clause, mode string) ClauseResult {
	start := time.Now()
	r := ClauseResult{ID: cl.id, Section: cl.section, Description: cl.description}
	finish := func(res Result, reason string) ClauseResult {
		r.Result, r.Reason, r.Duration = res, reason, time.Since(start).Round(time.Millisecond).String()
		return r
	}
	switch {
	case cl.needsSequencer && mode == ModeWithoutSequencer:
		return finish(Skipped, "needs express-sequencer, which is not installed for this namespace (no target hash stamped on a dry-run create)")
	case cl.needsSequencer && mode == ModeSequencerAudits:
		return finish(Skipped, "needs express-sequencer enforcing, and this namespace is in audit mode (a dry-run create is stamped, not gated): run the kit in a namespace labelled "+
			v2alpha1.LabelSequencing+"="+v2alpha1.ModeEnforce)
	}
	if cl.skip != nil {
		if why := cl.skip(cfg); why != "" {
			return finish(Skipped, why)
		}
	}
	p := &probe{c: c, cfg: cfg, ns: cfg.Namespace, name: cl.id + "-be"}
	defer p.delete(context.WithoutCancel(ctx))
	if err := cl.check(ctx, p); err != nil {
		switch {
		case errors.Is(err, errNothingToJudge):
			return finish(Skipped, err.Error())
		case couldNotJudge(ctx, err):
			return finish(Errored, err.Error())
		}
		return finish(Failed, err.Error())
	}
	return finish(Passed, "")
}

// Run runs the kit as a test of t: a subtest per clause, failed with the
// clause's evidence, skipped with its reason. It fails t at once if the
// kit cannot run.
func Run(t *testing.T, cfg Config) Report {
	t.Helper()
	report, err := Check(context.Background(), cfg)
	if err != nil {
		t.Fatalf("express operator conformance: %v", err)
	}
	for _, c := range report.Clauses {
		t.Run(c.ID, func(t *testing.T) {
			switch c.Result {
			case Skipped:
				t.Skip(c.Reason)
			case Failed:
				t.Errorf("%s (%s): %s", c.Description, c.Section, c.Reason)
			case Errored:
				t.Errorf("the kit could not judge %s (%s): %s", c.ID, c.Section, c.Reason)
			}
		})
	}
	return report
}
