package sequencer

import (
	"unique"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// The JSON decoder gives every object its own copy of every string: each
// Express node repeats its annotations' keys, its tenant's node names in
// two prerequisite lists, "Frontend", "Ready" and "True" in each entry,
// and its tenant's rollout-id and rendered nodes. What the cache keeps of
// a node or pod shares one copy of each such string (unique.Make; a copy
// no object holds any more is collected), and keeps its own of what is
// the object's alone (times, messages, UIDs).

func intern(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// sharedValues are the annotations whose values a node shares with the
// other nodes of its tenant, or with its own other annotations.
var sharedValues = map[string]bool{
	v2alpha1.AnnotationTargetHash: true, v2alpha1.AnnotationReleasedTarget: true,
	v2alpha1.AnnotationRolloutID: true, v2alpha1.AnnotationTargetRolloutID: true,
	v2alpha1.AnnotationRenderedNodes: true, v2alpha1.AnnotationDefaultedPrerequisites: true,
	v2alpha1.AnnotationExplicitPrerequisites: true, v2alpha1.AnnotationPauseRollout: true,
	v2alpha1.AnnotationIgnorePrerequisites: true,
	// kubectl's, cut to the lists it names (rollout.CutForCache): few
	// distinct values.
	corev1.LastAppliedConfigAnnotation: true,
}

// sharedPodLabels are the labels whose values an Express pod shares with
// its node, its StatefulSet's other pods or other nodes.
var sharedPodLabels = map[string]bool{
	v2alpha1.LabelNode: true, v2alpha1.LabelTargetHash: true, v2alpha1.LabelExpressVersion: true,
	v2alpha1.LabelDeploymentRevision: true, appsv1.ControllerRevisionHashLabelKey: true,
}

// internedMap is m with its keys interned, and the values of the keys in
// shared interned too; nil stays nil.
func internedMap(m map[string]string, shared map[string]bool) map[string]string {
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if shared == nil || shared[k] {
			v = intern(v)
		}
		out[intern(k)] = v
	}
	return out
}

// internNode shares the strings of cached node n that other nodes repeat.
func internNode(n v2alpha1.Node) {
	n.SetNamespace(intern(n.GetNamespace()))
	n.SetLabels(internedMap(n.GetLabels(), nil))
	n.SetAnnotations(internedMap(n.GetAnnotations(), sharedValues))
	s := n.NodeSpec()
	c := &s.ClusterConfig
	c.ClusterName, c.TenantID, c.TenantName = intern(c.ClusterName), intern(c.TenantID), intern(c.TenantName)
	s.ExpressVersion, s.DeploymentRevision, s.ConfigChangeset = intern(s.ExpressVersion), intern(s.DeploymentRevision), intern(s.ConfigChangeset)
	if d := s.DeploymentDependencies; d != nil {
		internPrerequisites(d.ProvisioningPrerequisites)
		internPrerequisites(d.UpgradePrerequisites)
	}
	for i := range s.RolloutGates {
		s.RolloutGates[i].Name = intern(s.RolloutGates[i].Name)
	}
	internConditions(n.NodeStatus().Conditions)
}

func internPrerequisites(ps []v2alpha1.Prerequisite) {
	for i := range ps {
		p := &ps[i]
		p.ExpressNode, p.Kind, p.PodConditionType, p.ConditionStatus = intern(p.ExpressNode), intern(p.Kind), intern(p.PodConditionType), intern(p.ConditionStatus)
		p.ExpressVersion, p.DeploymentRevision = intern(p.ExpressVersion), intern(p.DeploymentRevision)
	}
}

func internConditions(cs []metav1.Condition) {
	for i := range cs {
		c := &cs[i]
		c.Type, c.Status, c.Reason = intern(c.Type), metav1.ConditionStatus(intern(string(c.Status))), intern(c.Reason)
	}
}
