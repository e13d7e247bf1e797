package conformance

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// ContractVersion is the version of docs/express-operator-contract.md the
// clauses check.
const ContractVersion = "v4"

// Config says where and how the kit checks an operator.
type Config struct {
	// RESTConfig reaches the cluster the operator runs in.
	RESTConfig *rest.Config
	// Namespace is a scratch namespace the kit creates its nodes in; it
	// must exist. The kit deletes what it created unless Keep is set.
	Namespace string
	// GroupVersion is the API group and version of the Express kinds
	// (express.medallia.com/v2alpha1 when empty).
	GroupVersion schema.GroupVersion
	// Versions are two expressVersion values the operator can run, the
	// second the target of the changes it is checked on
	// ("conformance-1", "conformance-2" when empty).
	Versions [2]string
	// FailingVersion, when set, is an expressVersion whose containers
	// cannot start (an image that does not exist, a crash at start): the
	// failing-pods clause runs on it. Empty, the clause is skipped.
	FailingVersion string
	// Spec holds spec fields the operator needs on every node (its own
	// required fields), merged into what the kit writes.
	Spec map[string]any
	// UnactedField is a string spec field the operator keeps but does not
	// act on, a dotted path under spec ("extensions.note"): the kit
	// changes it to check that every change of target is rolled, and the
	// CRD clause writes it to check that the API server keeps it.
	// "conformanceProbe" (a field unknown to the operator, kept by a CRD
	// that preserves unknown fields) when empty.
	UnactedField string
	// Clauses, when set, are the ids of the clauses to run; every clause
	// otherwise.
	Clauses []string
	// HoldWindow is how long a gated node is watched for a pod the
	// operator must not make (5 s when 0).
	HoldWindow time.Duration
	// RolloutTimeout bounds a rollout the operator must carry out (2 min
	// when 0).
	RolloutTimeout time.Duration
	// RecreateWithin is how soon, once it is gone, a deleted pod of a node
	// no gate holds must be back and Ready (30 s when 0).
	RecreateWithin time.Duration
	// Keep leaves the kit's nodes in the namespace, for a look after a
	// failure.
	Keep bool
	// Implementation names the operator in the report.
	Implementation Implementation
	// Progress, when set, is told as each clause starts and ends.
	Progress func(clause string, result *ClauseResult)
}

// Implementation identifies the operator checked, as Gateway API's
// conformance reports do.
type Implementation struct {
	Organization string   `json:"organization,omitempty"`
	Project      string   `json:"project,omitempty"`
	URL          string   `json:"url,omitempty"`
	Version      string   `json:"version,omitempty"`
	Contact      []string `json:"contact,omitempty"`
}

// withDefaults fills in what the config leaves empty.
func (c Config) withDefaults() Config {
	if c.GroupVersion.Empty() {
		c.GroupVersion = v2alpha1.GroupVersion
	}
	if c.Versions[0] == "" || c.Versions[1] == "" {
		c.Versions = [2]string{"conformance-1", "conformance-2"}
	}
	if c.UnactedField == "" {
		c.UnactedField = "conformanceProbe"
	}
	if c.HoldWindow <= 0 {
		c.HoldWindow = 5 * time.Second
	}
	if c.RolloutTimeout <= 0 {
		c.RolloutTimeout = 2 * time.Minute
	}
	if c.RecreateWithin <= 0 {
		c.RecreateWithin = 30 * time.Second
	}
	return c
}
