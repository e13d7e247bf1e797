package webhook

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// podConditionTypes are the pod conditions a prerequisite may wait for.
var podConditionTypes = []string{
	string(corev1.PodReady), string(corev1.ContainersReady), string(corev1.PodInitialized),
	string(corev1.PodScheduled), string(corev1.PodReadyToStartContainers),
}

// conditionStatuses are the statuses a prerequisite's condition may have.
var conditionStatuses = []string{
	string(corev1.ConditionTrue), string(corev1.ConditionFalse), string(corev1.ConditionUnknown),
}

// Validator is the validating webhook of one node kind: it denies specs that
// can never make progress and warns about prerequisites that cannot be met
// yet.
type Validator[T v2alpha1.Node] struct {
	// Reader lists the tenant's nodes; the manager's cache in production.
	Reader client.Reader
	// Fresh, when set, reads straight from the API server whether a node of
	// the other kind has a new node's name: the cache may not have seen one
	// created an instant before.
	Fresh client.Reader
	// Orders are the installation's default orders, which defaulted lists
	// follow when the validator looks for a cycle.
	Orders defaults.Orders
	// Releases, when set, judges every removal of the sequencer's gate
	// again on the tenant as it is now (release_guard.go).
	Releases *ReleaseGuard
	// Deletions, when set, dates every deletion of a node on the nodes of
	// its tenant that stay (deletion_dater.go).
	Deletions *DeletionDater
}

// ValidateCreate checks a new node.
func (v *Validator[T]) ValidateCreate(ctx context.Context, obj T) (admission.Warnings, error) {
	warnings, err := v.validate(ctx, obj, true)
	if err != nil {
		return warnings, err
	}
	return warnings, v.nameTakenNow(ctx, obj)
}

// nameTakenNow refuses obj where a node of the other kind has its name now,
// read by name from the API server: Check finds only those the cache has
// seen. Two created at the same instant can still both pass; the sequencer
// then holds the pods of the name (NameShared). A read that fails leaves
// the cache's answer standing.
func (v *Validator[T]) nameTakenNow(ctx context.Context, obj T) error {
	if v.Fresh == nil {
		return nil
	}
	otherKind := v2alpha1.OtherKind(obj.NodeKind())
	other := v2alpha1.NewNode(otherKind)
	if err := v.Fresh.Get(ctx, client.ObjectKeyFromObject(obj), other); err != nil || other.GetDeletionTimestamp() != nil {
		return nil
	}
	gk := schema.GroupKind{Group: v2alpha1.GroupVersion.Group, Kind: obj.NodeKind()}
	return apierrors.NewInvalid(gk, obj.GetName(), field.ErrorList{nameTaken(obj, otherKind)})
}

// nameTaken is the error of node obj, whose name a node of kind has.
func nameTaken(obj v2alpha1.Node, kind string) *field.Error {
	return field.Invalid(field.NewPath("metadata", "name"), obj.GetName(), fmt.Sprintf(
		"a %s named %s already exists in namespace %s: a Backend and a Frontend cannot share a name, since pods name their node by name alone (label %s)",
		kind, obj.GetName(), obj.GetNamespace(), v2alpha1.LabelNode))
}

// ValidateUpdate checks a changed node. An update that leaves the node's
// explicit prerequisite lists and tenant alone brings no error of its own:
// a node whose lists other nodes' changes made invalid (a node created since
// under a name it lists, a cycle two parallel creates closed) keeps taking
// such updates — the operator's finalizers, labels, the sequencer's patches
// — with the errors as warnings. An update that touches them is checked in
// full: some error already there would otherwise hide a new one (Check stops
// before the cycle search once a list has an error). A node being deleted
// takes every update, since it takes no part in the order.
func (v *Validator[T]) ValidateUpdate(ctx context.Context, oldObj, obj T) (admission.Warnings, error) {
	if obj.GetDeletionTimestamp() != nil {
		return nil, nil
	}
	released := obj.GetAnnotations()[v2alpha1.AnnotationReleasedTarget]
	gateRemoved := rollout.Gated(oldObj) && !rollout.Gated(obj)
	recorded := !rollout.Gated(oldObj) && !rollout.Gated(obj) && released != "" &&
		released != oldObj.GetAnnotations()[v2alpha1.AnnotationReleasedTarget] && fromSequencerManager(ctx)
	if v.Releases == nil && (gateRemoved || recorded) && guardedRelease(ctx) {
		return nil, notJudged(schema.GroupResource{Group: v2alpha1.GroupVersion.Group, Resource: resourceOf(obj)}, obj.GetName())
	}
	if v.Releases != nil && gateRemoved {
		if err := v.Releases.nodeRelease(ctx, obj); err != nil {
			return nil, err
		}
	}
	if v.Releases != nil && recorded {
		if err := v.Releases.recordWithoutGate(ctx, obj, released); err != nil {
			return nil, err
		}
	}
	warnings, err := v.validate(ctx, obj, !sameOrderingInputs(oldObj, obj))
	if to := obj.NodeSpec().ClusterConfig.ClusterName; err == nil && v.Deletions != nil && to != oldObj.NodeSpec().ClusterConfig.ClusterName {
		// The node leaves its tenant: for the nodes it leaves, as if deleted.
		dated, err := v.Deletions.date(ctx, oldObj, "move to tenant "+to)
		return append(warnings, dated...), err
	}
	return warnings, err
}

// fromSequencerManager reports whether the request is written as the
// sequencer's field manager.
func fromSequencerManager(ctx context.Context) bool {
	req, err := admission.RequestFromContext(ctx)
	return err == nil && sequencerManager(fieldManager(req))
}

// guardedRelease reports whether the request is a release the sequencer
// planned on a scoped read: one that rests on the release guard's judgement.
func guardedRelease(ctx context.Context) bool {
	req, err := admission.RequestFromContext(ctx)
	return err == nil && fieldManager(req) == v2alpha1.FieldManagerGuardedRelease
}

// sameOrderingInputs reports whether an update leaves what Check judges of
// the node itself alone: its tenant and each explicit prerequisite list (a
// defaulted list is the webhook's, rewritten from the default order).
func sameOrderingInputs(oldObj, obj v2alpha1.Node) bool {
	if oldObj.NodeSpec().ClusterConfig.ClusterName != obj.NodeSpec().ClusterConfig.ClusterName {
		return false
	}
	for _, l := range defaults.Lists {
		if defaults.IsDefaulted(obj, l) && defaults.IsDefaulted(oldObj, l) {
			continue
		}
		if !reflect.DeepEqual(l.Get(oldObj.NodeSpec()), l.Get(obj.NodeSpec())) {
			return false
		}
	}
	return true
}

// ValidateDelete allows every delete that is dated (DeletionDater): a
// deleted node leaves the order, and the nodes it frees wait for the
// settle time after it, as for any change of the order. A node moved to
// another tenant (ValidateUpdate) is dated the same way.
func (v *Validator[T]) ValidateDelete(ctx context.Context, obj T) (admission.Warnings, error) {
	if v.Deletions == nil {
		return nil, nil
	}
	return v.Deletions.date(ctx, obj, "deletion")
}

// validate checks obj against its namespace's nodes; its errors are denied,
// or with deny false admitted as warnings.
func (v *Validator[T]) validate(ctx context.Context, obj T, deny bool) (admission.Warnings, error) {
	siblings, err := sequencer.NamespaceNodes(ctx, v.Reader, obj.GetNamespace())
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	warnings, errs := Check(obj, siblings, v.Orders)
	switch {
	case len(errs) == 0:
		return warnings, nil
	case deny:
		gk := schema.GroupKind{Group: v2alpha1.GroupVersion.Group, Kind: obj.NodeKind()}
		return warnings, apierrors.NewInvalid(gk, obj.GetName(), errs)
	}
	for _, e := range errs {
		warnings = append(warnings, e.Error()+" (so before this update, which leaves the lists alone: admitted; the node cannot proceed until it is fixed)")
	}
	return warnings, nil
}

// Check validates a node against the other nodes of its namespace. It is pure
// so that `kubectl express defaults` and the webhook give the same verdicts.
// Errors name the field path and the nodes; warnings are for what may still
// come right (a prerequisite that does not exist yet, a name that fits no
// node key).
func Check(obj v2alpha1.Node, namespaceNodes []v2alpha1.Node, orders defaults.Orders) (admission.Warnings, field.ErrorList) {
	var warnings admission.Warnings
	var errs field.ErrorList
	spec := obj.NodeSpec()
	cluster := spec.ClusterConfig.ClusterName
	if _, ok := defaults.KeyOf(obj); !ok {
		warnings = append(warnings, fmt.Sprintf(
			"%s %s does not fit the node names of tenant %s (%s-be for the Backend, %s-fe<n> for Frontends): it gets no default prerequisites and has no place in the default order",
			obj.NodeKind(), obj.GetName(), cluster, cluster, cluster))
	}

	for _, msg := range validation.IsValidLabelValue(obj.GetName()) {
		// Its pods name it in a label; a name no label can hold leaves them
		// nameless: no pod of it could ever be held or counted.
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), obj.GetName(), fmt.Sprintf(
			"%s: a node's pods carry its name in label %s", msg, v2alpha1.LabelNode)))
	}

	byName := map[string]v2alpha1.Node{}
	var siblings []v2alpha1.Node
	for _, n := range namespaceNodes {
		if n.GetName() == obj.GetName() && n.NodeKind() == obj.NodeKind() {
			continue
		}
		if n.GetName() == obj.GetName() {
			// Pods name their node by name alone (express.medallia.com/node),
			// and so do the sequencer's snapshots: a Backend and a Frontend
			// of one name would hide each other. (A node being deleted is
			// never checked: ValidateUpdate admits its every update.)
			errs = append(errs, nameTaken(obj, n.NodeKind()))
			continue
		}
		byName[n.GetName()] = n
		if n.NodeSpec().ClusterConfig.ClusterName == cluster {
			siblings = append(siblings, n)
		}
	}
	byName[obj.GetName()] = obj

	for _, l := range defaults.Lists {
		defaulted := defaults.IsDefaulted(obj, l)
		seen := map[string]int{}
		for i, p := range l.Get(spec) {
			path := field.NewPath("spec", "deploymentDependencies", string(l)).Index(i)
			if j, dup := seen[p.ExpressNode]; dup {
				errs = append(errs, field.Duplicate(path.Child("expressNode"),
					fmt.Sprintf("%s is already listed at index %d", p.ExpressNode, j)))
				continue
			}
			seen[p.ExpressNode] = i
			if !slices.Contains(podConditionTypes, p.PodConditionType) {
				errs = append(errs, field.NotSupported(path.Child("podConditionType"), p.PodConditionType, podConditionTypes))
			}
			if !slices.Contains(conditionStatuses, p.ConditionStatus) {
				errs = append(errs, field.NotSupported(path.Child("conditionStatus"), p.ConditionStatus, conditionStatuses))
			}
			if p.ExpressNode == obj.GetName() {
				errs = append(errs, field.Invalid(path.Child("expressNode"), p.ExpressNode,
					fmt.Sprintf("%s cannot be its own prerequisite", p.ExpressNode)))
				continue
			}
			target, exists := byName[p.ExpressNode]
			switch {
			case exists && target.NodeSpec().ClusterConfig.ClusterName != cluster:
				errs = append(errs, field.Invalid(path.Child("expressNode"), p.ExpressNode, fmt.Sprintf(
					"%s belongs to tenant %s, not %s: prerequisites must name nodes of the same tenant",
					p.ExpressNode, target.NodeSpec().ClusterConfig.ClusterName, cluster)))
			case exists && target.NodeKind() != p.Kind:
				errs = append(errs, field.Invalid(path.Child("kind"), p.Kind,
					fmt.Sprintf("%s is a %s, not a %s", p.ExpressNode, target.NodeKind(), p.Kind)))
			case !exists && !strings.HasPrefix(p.ExpressNode, cluster+"-"):
				errs = append(errs, field.Invalid(path.Child("expressNode"), p.ExpressNode, fmt.Sprintf(
					"%s is not a node of tenant %s: its nodes are named %s-<node key>", p.ExpressNode, cluster, cluster)))
			case !exists:
				if k, ok := defaults.KeyOfName(cluster, p.ExpressNode); ok && k.Kind() != p.Kind {
					errs = append(errs, field.Invalid(path.Child("kind"), p.Kind,
						fmt.Sprintf("%s is named as a %s, not a %s", p.ExpressNode, k.Kind(), p.Kind)))
				} else if !defaulted {
					warnings = append(warnings, fmt.Sprintf(
						"%s: %s %s does not exist yet; %s waits for it until it does",
						path.Child("expressNode"), p.Kind, p.ExpressNode, obj.GetName()))
				}
			}
		}
	}
	warnings = append(warnings, literalPredecessorLists(obj, orders)...)
	if len(errs) > 0 {
		return warnings, errs
	}
	c, ok := rollout.AdmissionCycle(obj, siblings, orders)
	switch {
	case ok && c.Definite:
		path := field.NewPath("spec", "deploymentDependencies", string(c.List)).Index(c.Index).Child("expressNode")
		errs = append(errs, field.Invalid(path, c.Path[1],
			fmt.Sprintf("%s is a cycle: none of these nodes could ever be released", c)))
	case ok:
		warnings = append(warnings, cycleWarning(c))
	}
	return warnings, errs
}

// literalPredecessorLists warns about explicit lists that name only the
// node's predecessor in the operator's order — the old chart's allNodeConfig
// rendered as lists. The sequencer follows an explicit list literally (the
// node waits for that one node), where the default waits for every live
// node before it in the reduced order: such a tenant orders some changes
// differently from the default (docs/migrating-from-allnodeconfig.md).
func literalPredecessorLists(obj v2alpha1.Node, orders defaults.Orders) admission.Warnings {
	k, ok := defaults.KeyOf(obj)
	if !ok {
		return nil
	}
	var warnings admission.Warnings
	cluster := obj.NodeSpec().ClusterConfig.ClusterName
	for _, l := range defaults.Lists {
		list, want := l.Get(obj.NodeSpec()), orders.Prerequisites(l, cluster, k)
		if defaults.IsDefaulted(obj, l) || len(list) != 1 || len(want) != 1 || list[0].ExpressNode != want[0].ExpressNode {
			continue
		}
		warnings = append(warnings, fmt.Sprintf(
			"spec.deploymentDependencies.%s: [%s] names only %s's predecessor in the operator's order, as the old chart's allNodeConfig renders it; "+
				"an explicit list is followed literally (%s waits for %s alone, not for every live node before it), which orders some changes "+
				"differently from the default (a frontends-only change rolls %s-fe3 together with %s-fe1; see docs/migrating-from-allnodeconfig.md): "+
				"leave deploymentDependencies out to follow the operator's order",
			l, list[0].ExpressNode, obj.GetName(), obj.GetName(), list[0].ExpressNode, cluster, cluster))
	}
	return warnings
}

// cycleWarning spells out a cycle that may still be transient: it runs
// through a defaulted list, or a node whose change has not landed yet.
func cycleWarning(c rollout.Cycle) string {
	var why []string
	if len(c.Defaulted) > 0 {
		why = append(why, fmt.Sprintf("%s by the default order", strings.Join(c.Defaulted, ", ")))
	}
	if len(c.Landing) > 0 {
		why = append(why, fmt.Sprintf("%s not yet carrying this change's %s", strings.Join(c.Landing, ", "), v2alpha1.AnnotationRolloutID))
	}
	return fmt.Sprintf("spec.deploymentDependencies.%s: %s is a cycle (%s): the tenant stops there (DependencyCycle) at its next change unless another list changes",
		c.List, c, strings.Join(why, "; "))
}
