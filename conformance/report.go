package conformance

import (
	"encoding/xml"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"sigs.k8s.io/yaml"
)

// Result is how a clause ended.
type Result string

// The results of a clause.
const (
	Passed  Result = "passed"
	Failed  Result = "failed"
	Skipped Result = "skipped"
	// Errored: the kit could not judge the clause — its own access was
	// refused, the API server was not reached, the run was cancelled —
	// which says nothing of the operator.
	Errored Result = "error"
)

// ClauseResult is one clause of a report: what it checks and how it ended,
// with the evidence of a failure (the object and the moment it broke the
// rule) or the reason of a skip.
type ClauseResult struct {
	ID          string `json:"id"`
	Section     string `json:"section"`
	Description string `json:"description"`
	Result      Result `json:"result"`
	// Reason is a failure's evidence, or why the clause was skipped.
	Reason   string `json:"reason,omitempty"`
	Duration string `json:"duration"`
}

// Summary counts the clauses by result, and says the run's, in Gateway
// API's words: success (every clause passed), partial (none failed, some
// skipped: what they check was not shown) or failure; and error where none
// failed but the kit could not judge a clause.
type Summary struct {
	Result  string `json:"result"`
	Passed  int    `json:"passed"`
	Failed  int    `json:"failed"`
	Skipped int    `json:"skipped"`
	Errored int    `json:"errored,omitempty"`
}

// The results of a run.
const (
	RunSuccess = "success"
	RunPartial = "partial"
	RunFailure = "failure"
	RunError   = "error"
)

// Report is a run of the kit, in the shape of Gateway API's conformance
// reports: who was checked, against which version of the contract, and
// each clause's result.
type Report struct {
	APIVersion      string         `json:"apiVersion"`
	Kind            string         `json:"kind"`
	Date            string         `json:"date"`
	Implementation  Implementation `json:"implementation"`
	ContractVersion string         `json:"contractVersion"`
	// Mode says whether express-sequencer was installed, and enforcing:
	// enforcing, its webhook stamped the target hash and gated each change;
	// auditing, it stamped the hash and gated nothing.
	Mode      string         `json:"mode"`
	Namespace string         `json:"namespace"`
	Summary   Summary        `json:"summary"`
	Clauses   []ClauseResult `json:"clauses"`
}

// The modes of a run.
const (
	ModeWithSequencer    = "with express-sequencer"
	ModeWithoutSequencer = "without express-sequencer"
	// ModeSequencerAudits: express-sequencer stamps the namespace's nodes
	// but gates none (audit mode); the clauses that need it are skipped.
	ModeSequencerAudits = "with express-sequencer in audit mode"
)

// newReport starts the report of a run.
func newReport(cfg Config, now time.Time) Report {
	return Report{APIVersion: "conformance.express.medallia.com/v1alpha1", Kind: "ConformanceReport", Date: now.UTC().Format(time.RFC3339),
		Implementation: cfg.Implementation, ContractVersion: ContractVersion, Namespace: cfg.Namespace}
}

// add records a clause's result.
func (r *Report) add(c ClauseResult) {
	r.Clauses = append(r.Clauses, c)
	switch c.Result {
	case Passed:
		r.Summary.Passed++
	case Failed:
		r.Summary.Failed++
	case Errored:
		r.Summary.Errored++
	default:
		r.Summary.Skipped++
	}
	switch {
	case r.Summary.Failed > 0:
		r.Summary.Result = RunFailure
	case r.Summary.Errored > 0:
		r.Summary.Result = RunError
	case r.Summary.Skipped > 0:
		r.Summary.Result = RunPartial
	default:
		r.Summary.Result = RunSuccess
	}
}

// Failed reports whether any clause failed.
func (r Report) Failed() bool { return r.Summary.Failed > 0 }

// Errored reports whether the kit could not judge some clause.
func (r Report) Errored() bool { return r.Summary.Errored > 0 }

// Clause returns the result of the clause called id, and false when the
// report has none.
func (r Report) Clause(id string) (ClauseResult, bool) {
	for _, c := range r.Clauses {
		if c.ID == id {
			return c, true
		}
	}
	return ClauseResult{}, false
}

// YAML renders the report as YAML.
func (r Report) YAML() ([]byte, error) { return yaml.Marshal(r) }

// junitSuites is JUnit XML's root, as CI systems read it.
type junitSuites struct {
	XMLName xml.Name     `xml:"testsuites"`
	Suites  []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// JUnit renders the report as JUnit XML: a test case per clause.
func (r Report) JUnit() ([]byte, error) {
	suite := junitSuite{Name: "express-operator-conformance " + r.ContractVersion, Tests: len(r.Clauses), Failures: r.Summary.Failed, Errors: r.Summary.Errored, Skipped: r.Summary.Skipped}
	var total time.Duration
	for _, c := range r.Clauses {
		d, _ := time.ParseDuration(c.Duration)
		total += d
		tc := junitCase{Name: c.ID, Classname: c.Section, Time: fmt.Sprintf("%.3f", d.Seconds())}
		switch c.Result {
		case Failed:
			tc.Failure = &junitMessage{Message: c.Description, Text: c.Reason}
		case Errored:
			tc.Error = &junitMessage{Message: "the kit could not judge: " + c.Description, Text: c.Reason}
		case Skipped:
			tc.Skipped = &junitMessage{Message: c.Reason}
		}
		suite.Cases = append(suite.Cases, tc)
	}
	suite.Time = fmt.Sprintf("%.3f", total.Seconds())
	out, err := xml.MarshalIndent(junitSuites{Suites: []junitSuite{suite}}, "", "  ")
	if err != nil {
		return nil, err
	}
	return append([]byte(xml.Header), append(out, '\n')...), nil
}

// Table writes the report as a table for a terminal: a row per clause, the
// evidence of each failure under it, and a summary line.
func (r Report) Table(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLAUSE\tSECTION\tRESULT\tTIME")
	for _, c := range r.Clauses {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", c.ID, c.Section, strings.ToUpper(string(c.Result)), c.Duration)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range r.Clauses {
		if c.Result != Passed && c.Reason != "" {
			fmt.Fprintf(w, "\n%s %s: %s\n  %s\n", c.ID, c.Result, c.Description, c.Reason)
		}
	}
	errored := ""
	if r.Summary.Errored > 0 {
		errored = fmt.Sprintf(", %d could not be judged (error: the kit's access or the cluster, not the operator)", r.Summary.Errored)
	}
	_, err := fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped%s (%s, contract %s)\n", r.Summary.Passed, r.Summary.Failed, r.Summary.Skipped, errored, r.Mode, r.ContractVersion)
	return err
}
