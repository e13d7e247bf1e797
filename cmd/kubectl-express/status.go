package main

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// tenantStatus is one tenant of the fleet view (-o json|yaml: one element
// of "tenants").
type tenantStatus struct {
	Namespace     string    `json:"namespace"`
	Tenant        string    `json:"tenant"`
	State         string    `json:"state"`
	LiveNodes     int       `json:"liveNodes"`
	NodesOnTarget int       `json:"nodesOnTarget"`
	Rolling       []string  `json:"rolling,omitempty"`
	Next          *nextNode `json:"next,omitempty"`
	// NotRendered are the tenant's nodes the latest render of its chart
	// does not list (express.medallia.com/rendered-nodes): dropped from the
	// values and not pruned, they hold none of its changes.
	NotRendered []string `json:"notRendered,omitempty"`
	// Since is when the tenant entered its state, as its nodes' conditions
	// tell; absent when none says.
	Since *time.Time `json:"since,omitempty"`
	// OutOfOrder and WouldHaveHeld count the nodes whose last finding of
	// the order auditor (their OrderKept condition) is a violation, or, in
	// audit mode, a would-have-held.
	OutOfOrder    int `json:"outOfOrder,omitempty"`
	WouldHaveHeld int `json:"wouldHaveHeld,omitempty"`
}

// nextNode is the node a tenant's row names: the stuck one, or the next to
// go in the upgrade order, and what holds it.
type nextNode struct {
	Node       string   `json:"node"`
	Reason     string   `json:"reason"`
	Message    string   `json:"message"`
	WaitingFor []string `json:"waitingFor,omitempty"`
}

// fleetSummary counts the tenants shown by state, and their nodes.
type fleetSummary struct {
	Tenants       int `json:"tenants"`
	Stuck         int `json:"stuck"`
	Held          int `json:"held"`
	Rolling       int `json:"rolling"`
	Done          int `json:"done"`
	NodesOnTarget int `json:"nodesOnTarget"`
	LiveNodes     int `json:"liveNodes"`
	// OutOfOrder and WouldHaveHeld sum the tenants' (tenantStatus).
	OutOfOrder    int `json:"outOfOrder"`
	WouldHaveHeld int `json:"wouldHaveHeld"`
}

// fleet is the whole view (-o json|yaml).
type fleet struct {
	Summary fleetSummary   `json:"summary"`
	Tenants []tenantStatus `json:"tenants"`
}

// stateRank orders tenants as the view lists them: stuck first.
var stateRank = []rollout.TenantState{rollout.Stuck, rollout.Held, rollout.Rolling, rollout.Done}

// readFleet reads namespace ns (every namespace when empty) with one LIST
// per kind from c (the API server, or status -w's informers) and sums up
// each tenant with the sequencer's own Plan. Only
// tenants one of whose nodes matches selector are kept, and with stuckOnly
// only stuck ones.
func (e *env) readFleet(ctx context.Context, c client.Reader, ns string, orders defaults.Orders, selector labels.Selector, stuckOnly bool, now time.Time) (fleet, error) {
	read, err := sequencer.ReadNamespace(ctx, c, ns)
	if err != nil {
		return fleet{}, err
	}
	var f fleet
	for _, t := range rollout.FleetOf(read, orders, now, e.progressDeadline, e.grouping) {
		if stuckOnly && t.State != rollout.Stuck || !slices.ContainsFunc(t.Nodes, func(n v2alpha1.Node) bool { return selector.Matches(labels.Set(n.GetLabels())) }) {
			continue
		}
		st := statusOf(t.Tenant.Namespace, t.Tenant.ClusterName, t.Progress)
		for _, n := range t.Nodes {
			if c := meta.FindStatusCondition(n.NodeStatus().Conditions, v2alpha1.ConditionOrderKept); c != nil && c.Status == metav1.ConditionFalse {
				if c.Reason == v2alpha1.ReasonWouldHaveHeld {
					st.WouldHaveHeld++
				} else {
					st.OutOfOrder++
				}
			}
		}
		f.Tenants = append(f.Tenants, st)
	}
	slices.SortFunc(f.Tenants, func(a, b tenantStatus) int {
		ra, rb := slices.Index(stateRank, rollout.TenantState(a.State)), slices.Index(stateRank, rollout.TenantState(b.State))
		if ra != rb {
			return ra - rb
		}
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Tenant, b.Tenant))
	})
	for _, t := range f.Tenants {
		f.Summary.Tenants++
		f.Summary.NodesOnTarget += t.NodesOnTarget
		f.Summary.LiveNodes += t.LiveNodes
		f.Summary.OutOfOrder += t.OutOfOrder
		f.Summary.WouldHaveHeld += t.WouldHaveHeld
		switch rollout.TenantState(t.State) {
		case rollout.Stuck:
			f.Summary.Stuck++
		case rollout.Held:
			f.Summary.Held++
		case rollout.Rolling:
			f.Summary.Rolling++
		case rollout.Done:
			f.Summary.Done++
		}
	}
	return f, nil
}

func statusOf(namespace, cluster string, p rollout.Progress) tenantStatus {
	t := tenantStatus{Namespace: namespace, Tenant: cluster, State: string(p.State), LiveNodes: p.Live, NodesOnTarget: p.OnTarget, Rolling: p.Rolling, NotRendered: p.NotRendered}
	if p.Next != nil {
		t.Next = &nextNode{Node: p.Next.Node, Reason: p.Next.Condition.Reason, Message: p.Next.Condition.Message, WaitingFor: p.Next.WaitingFor}
	}
	if !p.Since.IsZero() {
		since := p.Since.UTC()
		t.Since = &since
	}
	return t
}
