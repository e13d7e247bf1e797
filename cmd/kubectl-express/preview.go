package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// currentNode is a node as it runs now, with the target hash it was
// admitted with.
type currentNode struct {
	node v2alpha1.Node
	hash string
}

// previewOptions are plan's flags for a proposed change.
type previewOptions struct {
	files, current     []string
	offline, recursive bool
	output             string
}

// preview predicts the order in which a proposed change — the manifests —
// would be rolled out: online, from the live tenant, each manifest admitted
// by the API server in a dry run (through the webhooks); offline, from the
// current manifests (every node Ready on them) or from nothing (a new
// tenant), each manifest admitted with the webhooks' own code. Then the
// sequencer's own Plan runs on the result until nothing more is released.
func (e *env) preview(ctx context.Context, tenant string, o previewOptions) (string, error) {
	proposed, err := e.readManifests(o.files, o.recursive)
	if err != nil {
		return "", err
	}
	var s *rollout.Snapshot
	if o.offline {
		var orders defaults.Orders
		if orders, err = e.orders(); err != nil {
			return "", err
		}
		s, err = e.offlineSnapshot(proposed, o.current, o.recursive, orders, tenant)
	} else {
		s, err = e.onlineSnapshot(ctx, proposed, tenant)
	}
	if err != nil {
		return "", err
	}
	if tenant != "" && tenant != s.Tenant.ClusterName {
		return "", fmt.Errorf("the manifests are of tenant %q, not %q", s.Tenant.ClusterName, tenant)
	}
	p := rollout.Preview(s)
	var buf bytes.Buffer
	switch o.output {
	case "json", "yaml":
		data, err := json.MarshalIndent(previewJSON(s, p), "", "  ")
		if err != nil {
			return "", err
		}
		if o.output == "yaml" {
			if data, err = yaml.JSONToYAML(data); err != nil {
				return "", err
			}
		}
		buf.Write(data)
		if o.output == "json" {
			buf.WriteByte('\n')
		}
	case "mermaid":
		previewMermaid(&buf, p)
	default:
		previewTable(&buf, s, p)
	}
	return buf.String(), nil
}

type previewStep struct {
	Step  int      `json:"step"`
	Nodes []string `json:"nodes"`
	Mode  string   `json:"mode"`
}

type previewResult struct {
	Tenant    string        `json:"tenant"`
	Namespace string        `json:"namespace"`
	Rolling   []string      `json:"rolling,omitempty"`
	Steps     []previewStep `json:"steps"`
	Stuck     []row         `json:"stuck,omitempty"`
}

func previewJSON(s *rollout.Snapshot, p rollout.Prediction) previewResult {
	out := previewResult{Tenant: s.Tenant.ClusterName, Namespace: s.Tenant.Namespace, Rolling: p.Rolling, Steps: []previewStep{}}
	for i, st := range p.Steps {
		out.Steps = append(out.Steps, previewStep{Step: i + 1, Nodes: st.Nodes, Mode: stepMode(st)})
	}
	for _, d := range p.Stuck {
		out.Stuck = append(out.Stuck, row{Node: d.Node, Kind: s.Nodes[d.Node].NodeKind(), Up: true, Mode: string(d.Mode), Gated: true,
			Reason: d.Condition.Reason, WaitingFor: d.WaitingFor, Message: d.Condition.Message})
	}
	return out
}

func stepMode(st rollout.Step) string {
	var modes []string
	for _, n := range st.Nodes {
		if m := string(st.Modes[n]); !slices.Contains(modes, m) {
			modes = append(modes, m)
		}
	}
	return strings.Join(modes, ", ")
}

func previewTable(buf *bytes.Buffer, s *rollout.Snapshot, p rollout.Prediction) {
	fmt.Fprintf(buf, "Tenant %s in namespace %s: the change would roll out in this order\n", s.Tenant.ClusterName, s.Tenant.Namespace)
	if len(p.Rolling) > 0 {
		fmt.Fprintf(buf, "  (already rolling, taken as finishing first: %s)\n", strings.Join(p.Rolling, ", "))
	}
	w := tabwriter.NewWriter(buf, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "STEP\tNODES\tMODE\tTARGET")
	for i, st := range p.Steps {
		var targets []string
		for _, n := range st.Nodes {
			if t := describeSpec(s.Nodes[n]); !slices.Contains(targets, t) {
				targets = append(targets, t)
			}
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\n", i+1, strings.Join(st.Nodes, ", "), stepMode(st), strings.Join(targets, "; "))
	}
	w.Flush()
	if len(p.Steps) == 0 {
		fmt.Fprintln(buf, "  nothing to roll out: no node's target changes")
	}
	for _, d := range p.Stuck {
		fmt.Fprintf(buf, "  %s would stay gated: %s: %s\n", d.Node, d.Condition.Reason, d.Condition.Message)
	}
}

func describeSpec(n v2alpha1.Node) string {
	return n.NodeSpec().ExpressVersion + revision(n.NodeSpec().DeploymentRevision)
}

func previewMermaid(buf *bytes.Buffer, p rollout.Prediction) {
	fmt.Fprintln(buf, "flowchart LR")
	prev := ""
	for i, st := range p.Steps {
		step := fmt.Sprintf("s%d", i+1)
		fmt.Fprintf(buf, "  %s[\"%d. %s\"]\n", step, i+1, strings.Join(st.Nodes, ", "))
		if prev != "" {
			fmt.Fprintf(buf, "  %s --> %s\n", prev, step)
		}
		prev = step
	}
	for _, d := range p.Stuck {
		fmt.Fprintf(buf, "  %s[\"%s: %s\"]:::stuck\n", id(d.Node), d.Node, d.Condition.Reason)
	}
	fmt.Fprintln(buf, "  classDef stuck fill:#fef2f2,stroke:#b91c1c")
}

// onlineSnapshot is the live tenant with the manifests admitted over it by
// the API server in a dry run: what kubectl apply --server-side would store,
// webhooks included.
func (e *env) onlineSnapshot(ctx context.Context, proposed []manifest, tenant string) (*rollout.Snapshot, error) {
	c, ns, err := e.client()
	if err != nil {
		return nil, err
	}
	orders, err := e.liveOrders(ctx, c) // the orders the webhooks admit the dry run with
	if err != nil {
		return nil, err
	}
	cluster, err := tenantOf(proposed, tenant)
	if err != nil {
		return nil, err
	}
	var admitted []v2alpha1.Node
	for _, m := range proposed {
		if m.node == nil || m.node.NodeSpec().ClusterConfig.ClusterName != cluster {
			continue
		}
		if m.node.GetNamespace() != "" {
			ns = m.node.GetNamespace()
		}
		n, err := dryRunApply(ctx, c, m.doc, ns)
		if err != nil {
			return nil, err
		}
		admitted = append(admitted, n)
	}
	s, err := tenantSnapshot(ctx, c, ns, cluster, orders, 0, rollout.Grouping{})
	if err != nil && !strings.HasPrefix(err.Error(), "no ") {
		return nil, err
	}
	if s == nil { // a new tenant
		s = &rollout.Snapshot{Tenant: rollout.Tenant{Namespace: ns, ClusterName: cluster}, Orders: orders, Now: time.Now(),
			Nodes: map[string]v2alpha1.Node{}, Pods: map[string][]rollout.Pod{}}
	}
	for _, n := range admitted {
		s.Nodes[n.GetName()] = n
	}
	return s, nil
}

// dryRunApply server-side applies one manifest in a dry run and returns the
// node the API server would store.
func dryRunApply(ctx context.Context, c client.Client, doc []byte, ns string) (v2alpha1.Node, error) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(doc, &u.Object); err != nil {
		return nil, err
	}
	if u.GetNamespace() == "" {
		u.SetNamespace(ns)
	}
	err := c.Patch(ctx, u, client.Apply, client.DryRunAll, client.FieldOwner("kubectl-express"), client.ForceOwnership)
	if err != nil {
		var status apierrors.APIStatus
		if errors.As(err, &status) {
			return nil, fmt.Errorf("%s %s would be refused: %w", u.GetKind(), u.GetName(), err)
		}
		return nil, err
	}
	n := v2alpha1.NewNode(u.GetKind())
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, n); err != nil {
		return nil, err
	}
	return n, nil
}

// offlineSnapshot admits the manifests with the webhooks' own code over the
// current manifests, every node of which is taken as released and Ready.
func (e *env) offlineSnapshot(proposed []manifest, currentFiles []string, recursive bool, orders defaults.Orders, tenant string) (*rollout.Snapshot, error) {
	cluster, err := tenantOf(proposed, tenant)
	if err != nil {
		return nil, err
	}
	current := map[string]currentNode{}
	ns := ""
	if len(currentFiles) > 0 {
		ms, err := e.readManifests(currentFiles, recursive)
		if err != nil {
			return nil, err
		}
		nodes, refused, err := e.admitLocally(ms, orders, nil)
		if err != nil {
			return nil, err
		}
		if len(refused) > 0 {
			return nil, fmt.Errorf("the current manifests: %s", strings.Join(refused, "; "))
		}
		for _, n := range nodes {
			if n == nil || n.NodeSpec().ClusterConfig.ClusterName != cluster {
				continue
			}
			n.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
			ann := n.GetAnnotations()
			ann[v2alpha1.AnnotationReleasedTarget] = ann[v2alpha1.AnnotationTargetHash]
			n.SetAnnotations(ann)
			current[n.GetName()] = currentNode{node: n, hash: ann[v2alpha1.AnnotationTargetHash]}
		}
	}
	nodes, refused, err := e.admitLocally(proposed, orders, current)
	if err != nil {
		return nil, err
	}
	if len(refused) > 0 {
		return nil, errors.New(strings.Join(refused, "\n"))
	}
	s := &rollout.Snapshot{Orders: orders, Now: time.Now(), Nodes: map[string]v2alpha1.Node{}, Pods: map[string][]rollout.Pod{}}
	for name, cur := range current {
		s.Nodes[name] = cur.node
		spec := cur.node.NodeSpec()
		if spec.IsUp() {
			s.Pods[name] = []rollout.Pod{{Name: name + "-0", Version: spec.ExpressVersion, Revision: spec.DeploymentRevision, Hash: cur.hash,
				Conditions: map[string]string{string(corev1.PodReady): string(corev1.ConditionTrue)}}}
		}
	}
	for _, n := range nodes {
		if n != nil && n.NodeSpec().ClusterConfig.ClusterName == cluster {
			s.Nodes[n.GetName()] = n
			ns = n.GetNamespace()
		}
	}
	s.Tenant = rollout.Tenant{Namespace: ns, ClusterName: cluster}
	return s, nil
}

// tenantOf returns the one tenant the manifests' nodes belong to.
func tenantOf(ms []manifest, want string) (string, error) {
	var tenants []string
	for _, m := range ms {
		if m.node != nil && !slices.Contains(tenants, m.node.NodeSpec().ClusterConfig.ClusterName) {
			tenants = append(tenants, m.node.NodeSpec().ClusterConfig.ClusterName)
		}
	}
	switch {
	case len(tenants) == 0:
		return "", errors.New("the manifests hold no Backend or Frontend")
	case want != "" && slices.Contains(tenants, want):
		return want, nil
	case want != "":
		return "", fmt.Errorf("the manifests hold no node of tenant %q (they hold %s)", want, strings.Join(tenants, ", "))
	case len(tenants) > 1:
		return "", fmt.Errorf("the manifests hold tenants %s: name one", strings.Join(tenants, ", "))
	}
	return tenants[0], nil
}
