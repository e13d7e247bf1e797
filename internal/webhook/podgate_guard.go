package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// PodGateGuard refuses an update of an Express pod that removes the
// sequencer's scheduling gate, unless the sequencer makes it: a gate removed
// by hand would let the pod schedule before its node's prerequisites are
// Ready, and leave no trace. The way to let a node's pods start regardless is
// the ignore-prerequisites annotation on the node: recorded in its condition
// and an Event, and the sequencer then removes the gates itself. Kubernetes
// only lets a scheduling gate be removed, never added back, so refusing is
// the only way to keep it.
type PodGateGuard struct {
	// Sequencer are the identities the sequencer writes as.
	Sequencer []string
}

// Handle decides one pod update.
func (g *PodGateGuard) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var pod, old corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod: %w", err))
	}
	if err := json.Unmarshal(req.OldObject.Raw, &old); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the stored pod: %w", err))
	}
	held := func(p corev1.Pod) bool {
		return slices.ContainsFunc(p.Spec.SchedulingGates, func(s corev1.PodSchedulingGate) bool { return s.Name == v2alpha1.GateSequencer })
	}
	if !held(old) || held(pod) || slices.Contains(g.Sequencer, req.UserInfo.Username) {
		return admission.Allowed("")
	}
	return admission.Denied(fmt.Sprintf(
		"spec.schedulingGates: the %s gate of pod %s is removed by express-sequencer only, once the prerequisites of node %s are Ready; "+
			"to let its pods start regardless, annotate the node %s=true",
		v2alpha1.GateSequencer, pod.Name, pod.Labels[v2alpha1.LabelNode], v2alpha1.AnnotationIgnorePrerequisites))
}
