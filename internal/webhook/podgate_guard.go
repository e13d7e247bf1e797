package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
//
// The sequencer's own removal is judged again on the tenant as it is now
// (Releases, when set): a release planned on state that has changed since
// is refused. A held pod's node label cannot change either, by anyone: the
// pod would be judged, and let go, as another node's.
type PodGateGuard struct {
	// Sequencer are the identities the sequencer writes as.
	Sequencer []string
	// Releases judges the sequencer's removals again.
	Releases *ReleaseGuard
}

// Handle decides one pod update.
func (g *PodGateGuard) Handle(ctx context.Context, req admission.Request) admission.Response {
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
	if was, now := old.Labels[v2alpha1.LabelNode], pod.Labels[v2alpha1.LabelNode]; heldBySequencer(old) && was != now {
		// Relabelled while held, the pod would be judged as another node's
		// (or, its label gone, by no webhook at all) and let go for that
		// node's prerequisites, not its own.
		return admission.Denied(fmt.Sprintf(
			"metadata.labels[%s]: pod %s is held by the %s scheduling gate until the prerequisites of node %s are Ready; its node label cannot change while it is held (to %q), which would have it judged as another node's; delete the pod instead",
			v2alpha1.LabelNode, pod.Name, v2alpha1.GateSequencer, was, now))
	}
	if !heldBySequencer(old) || heldBySequencer(pod) {
		return admission.Allowed("")
	}
	if slices.Contains(g.Sequencer, req.UserInfo.Username) {
		return g.sequencerRelease(ctx, req, pod)
	}
	return admission.Denied(fmt.Sprintf(
		"spec.schedulingGates: the %s gate of pod %s is removed by express-sequencer only, once the prerequisites of node %s are Ready; "+
			"to let its pods start regardless, annotate the node %s=true",
		v2alpha1.GateSequencer, pod.Name, pod.Labels[v2alpha1.LabelNode], v2alpha1.AnnotationIgnorePrerequisites))
}

// sequencerRelease lets the sequencer's removal of pod's gate through if it
// stands on the tenant as it is now.
func (g *PodGateGuard) sequencerRelease(ctx context.Context, req admission.Request, pod corev1.Pod) admission.Response {
	node := pod.Labels[v2alpha1.LabelNode]
	if g.Releases == nil {
		if fieldManager(req) == v2alpha1.FieldManagerGuardedRelease {
			status := notJudged(corev1.Resource("pods"), pod.Name).Status()
			return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
		}
		return admission.Allowed("")
	}
	why, err := g.Releases.stands(ctx, req.Namespace, node, "", pod.Name)
	var status apierrors.APIStatus
	switch {
	case errors.As(err, &status):
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: ptr.To(status.Status())}}
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	case why != "":
		resp := admission.Denied(fmt.Sprintf(
			"spec.schedulingGates: the release of pod %s of %s does not stand on the tenant as it is now: %s; express-sequencer plans it again", pod.Name, node, why))
		resp.Result.Code, resp.Result.Reason = http.StatusConflict, metav1.StatusReasonConflict
		return resp
	}
	return admission.Allowed("")
}
