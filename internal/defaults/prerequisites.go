package defaults

import (
	"encoding/json"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// List names one of a node's two prerequisite lists.
type List string

// The two prerequisite lists, named by their field in
// spec.deploymentDependencies.
const (
	ProvisioningList List = "provisioningPrerequisites"
	UpgradeList      List = "upgradePrerequisites"
)

// Lists are both prerequisite lists, provisioning first.
var Lists = []List{ProvisioningList, UpgradeList}

// Get returns the list of the spec, nil when absent.
func (l List) Get(s *v2alpha1.NodeSpec) []v2alpha1.Prerequisite {
	if s.DeploymentDependencies == nil {
		return nil
	}
	if l == ProvisioningList {
		return s.DeploymentDependencies.ProvisioningPrerequisites
	}
	return s.DeploymentDependencies.UpgradePrerequisites
}

func (l List) set(s *v2alpha1.NodeSpec, p []v2alpha1.Prerequisite) {
	if s.DeploymentDependencies == nil {
		s.DeploymentDependencies = &v2alpha1.DeploymentDependencies{}
	}
	if l == ProvisioningList {
		s.DeploymentDependencies.ProvisioningPrerequisites = p
	} else {
		s.DeploymentDependencies.UpgradePrerequisites = p
	}
}

// Order returns the order of the orders that this list follows.
func (l List) Order(o Orders) Order {
	if l == ProvisioningList {
		return o.Provisioning
	}
	return o.Upgrade
}

// Prerequisite returns the default prerequisite on the named node: Ready,
// status True, the kind of its key, and no version pins (the dependency's
// own target).
func Prerequisite(clusterName string, k Key) v2alpha1.Prerequisite {
	return v2alpha1.Prerequisite{
		ExpressNode:      NodeName(clusterName, k),
		Kind:             k.Kind(),
		PodConditionType: string(corev1.PodReady),
		ConditionStatus:  string(corev1.ConditionTrue),
	}
}

// Prerequisites returns the default list l of the node with key k: its
// predecessor in the order, or an empty (not absent) list for the first node.
func (o Orders) Prerequisites(l List, clusterName string, k Key) []v2alpha1.Prerequisite {
	prev, ok := l.Order(o).Predecessor(k)
	if !ok {
		return []v2alpha1.Prerequisite{}
	}
	return []v2alpha1.Prerequisite{Prerequisite(clusterName, prev)}
}

// record is the value of AnnotationDefaultedPrerequisites: for each list the
// webhook injected, the nodes it injected.
type record map[List][]string

func readRecord(n v2alpha1.Node) record {
	r := record{}
	if v, ok := n.GetAnnotations()[v2alpha1.AnnotationDefaultedPrerequisites]; ok {
		// A record that does not parse records nothing: every present list
		// is then the user's, which is the safe reading.
		if json.Unmarshal([]byte(v), &r) != nil {
			return record{}
		}
	}
	return r
}

func (r record) write(n v2alpha1.Node) {
	ann := n.GetAnnotations()
	if len(r) == 0 {
		if _, ok := ann[v2alpha1.AnnotationDefaultedPrerequisites]; ok {
			delete(ann, v2alpha1.AnnotationDefaultedPrerequisites)
			n.SetAnnotations(ann)
		}
		return
	}
	data, _ := json.Marshal(r) // a map of string slices always marshals
	if ann == nil {
		ann = map[string]string{}
	}
	ann[v2alpha1.AnnotationDefaultedPrerequisites] = string(data)
	n.SetAnnotations(ann)
}

// matches reports whether the list is exactly what the record says was
// injected: the recorded nodes as default prerequisites, in order.
func (r record) matches(l List, clusterName string, list []v2alpha1.Prerequisite) bool {
	names, ok := r[l]
	if !ok || list == nil || len(names) != len(list) {
		return false
	}
	for i, name := range names {
		k, ok := KeyOfName(clusterName, name)
		if !ok || list[i] != Prerequisite(clusterName, k) {
			return false
		}
	}
	return true
}

// RestoreRecord gives node n, as a request brings it, the record of injected
// lists that the stored node carries (none on create): the record is the
// webhook's, and a record a user writes — a manifest copied from kubectl get
// -o yaml, say — must not turn the user's lists into defaults that a new
// order would rewrite. A list counts as defaulted only if the webhook
// injected it.
func RestoreRecord(n, stored v2alpha1.Node) {
	ann := n.GetAnnotations()
	var v string
	var ok bool
	if stored != nil {
		v, ok = stored.GetAnnotations()[v2alpha1.AnnotationDefaultedPrerequisites]
	}
	if have, had := ann[v2alpha1.AnnotationDefaultedPrerequisites]; had == ok && have == v {
		return
	}
	if ann == nil {
		ann = map[string]string{}
	}
	if ok {
		ann[v2alpha1.AnnotationDefaultedPrerequisites] = v
	} else {
		delete(ann, v2alpha1.AnnotationDefaultedPrerequisites)
	}
	n.SetAnnotations(ann)
}

// lastAppliedAnnotation is where kubectl apply and Argo CD's client-side
// apply keep the manifest they applied.
const lastAppliedAnnotation = "kubectl.kubernetes.io/last-applied-configuration"

// declared reports whether the manifest last applied to the node
// (kubectl apply, Argo CD) sets list l: then the list is the user's, even
// where it equals what the webhook injected before.
func declared(n v2alpha1.Node, l List) bool {
	if marked(n, l) {
		return true
	}
	_, ok := lastAppliedLists(n.GetAnnotations()[lastAppliedAnnotation])[string(l)]
	return ok
}

// lastAppliedLists are the prerequisite lists a last-applied manifest
// sets, by field name; none for no manifest, or one that does not parse.
func lastAppliedLists(raw string) map[string]json.RawMessage {
	if raw == "" {
		return nil
	}
	var m struct {
		Spec struct {
			DeploymentDependencies map[string]json.RawMessage `json:"deploymentDependencies"`
		} `json:"spec"`
	}
	if json.Unmarshal([]byte(raw), &m) != nil {
		return nil
	}
	return m.Spec.DeploymentDependencies
}

// ShrinkLastApplied cuts the manifest last applied to node n (kubectl
// apply, Argo CD's client-side apply: the whole manifest, every field of
// the Express operator's too) to what IsDefaulted reads of it — which
// prerequisite lists it sets — in n's own annotations. For a copy kept to
// decide on (a cache), never one written back.
func ShrinkLastApplied(n v2alpha1.Node) { ShrinkLastAppliedIn(n.GetAnnotations()) }

// ShrinkLastAppliedIn is ShrinkLastApplied on a node's annotations. A
// manifest that sets no list (or does not parse) becomes "{}": the
// annotation stays, so that a node whose only annotation it is still has
// annotations as stored (a patch of one annotation adds to the map, and
// does not write the map whole).
func ShrinkLastAppliedIn(ann map[string]string) {
	raw, ok := ann[lastAppliedAnnotation]
	if !ok {
		return
	}
	kept := map[string]json.RawMessage{}
	for name := range lastAppliedLists(raw) {
		kept[name] = json.RawMessage("null")
	}
	shrunk := map[string]any{}
	if len(kept) > 0 {
		shrunk["spec"] = map[string]any{"deploymentDependencies": kept}
	}
	data, err := json.Marshal(shrunk)
	if err != nil {
		return // left whole: a map of field names to null always encodes
	}
	ann[lastAppliedAnnotation] = string(data)
}

// marked reports whether the node's explicit-prerequisites annotation
// names list l ("true" names both): the list is the user's, whoever wrote
// it and whatever it holds.
func marked(n v2alpha1.Node, l List) bool {
	for _, v := range strings.Split(n.GetAnnotations()[v2alpha1.AnnotationExplicitPrerequisites], ",") {
		if v = strings.TrimSpace(v); v == "true" || v == string(l) {
			return true
		}
	}
	return false
}

// IsDefaulted reports whether list l of the node is the operator's default:
// injected by the webhook and not changed since. A defaulted list means
// "every live node before me in the reduced order"; any other list is an
// explicit, per-tenant override.
func IsDefaulted(n v2alpha1.Node, l List) bool {
	if l.Get(n.NodeSpec()) == nil {
		return true // absent: not yet injected, the default applies
	}
	return !declared(n, l) && readRecord(n).matches(l, n.NodeSpec().ClusterConfig.ClusterName, l.Get(n.NodeSpec()))
}

// Apply injects the default prerequisites into the node: into each list that
// is absent, or that was injected earlier and is unchanged since (so a new
// default order refreshes it). A list the user set, including an explicit
// empty list, is never touched; nor is one the manifest last applied sets.
// The webhook reads the record of what it injected from the stored node
// (RestoreRecord) before it applies. Apply records what it injected in
// AnnotationDefaultedPrerequisites, and is idempotent.
//
// A node whose name fits no key of its tenant gets no defaults; Apply reports
// false and the validating webhook warns about it.
func (o Orders) Apply(n v2alpha1.Node) bool {
	k, ok := KeyOf(n)
	if !ok {
		return false
	}
	spec := n.NodeSpec()
	cluster := spec.ClusterConfig.ClusterName
	rec := readRecord(n)
	for _, l := range Lists {
		current := l.Get(spec)
		if current != nil && (declared(n, l) || !rec.matches(l, cluster, current)) {
			delete(rec, l) // the user's list
			continue
		}
		want := o.Prerequisites(l, cluster, k)
		if current == nil || !slices.Equal(current, want) {
			l.set(spec, want)
		}
		names := make([]string, len(want))
		for i, p := range want {
			names[i] = p.ExpressNode
		}
		rec[l] = names
	}
	rec.write(n)
	return true
}
