package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// freshReadTimeout bounds the pod webhook's fresh read: a second short of
// its timeoutSeconds (5, the marker in register.go), so that a read the API server
// does not answer is refused in the webhook's own words.
const freshReadTimeout = 4 * time.Second

// PodGate is the pod admission webhook (DESIGN §4b): it adds the
// sequencer's scheduling gate to a new pod of an Express node unless the node
// may proceed right now — it is in a released rollout that has not converged,
// or its live provisioning-predecessors are Ready. The API server sends it
// only pods labelled express.medallia.com/node (objectSelector); the
// sequencer removes the gate once the predecessors are Ready.
type PodGate struct {
	// Reader reads the tenant straight from the API server, not from a cache
	// that may lag a crash by the very milliseconds that matter.
	Reader client.Reader
	// Orders are the installation's default orders.
	Orders defaults.Orders
	// Grouping is the sequencer's change grouping: a hold it makes, the pod
	// webhook sees too.
	Grouping rollout.Grouping
	// Clock dates the snapshot.
	Clock clock.PassiveClock
	// DefaultMode is the mode of a namespace without the sequencing label:
	// in audit no pod is held.
	DefaultMode string
	// Cache, when set (--pod-reads-by-name), has a pod let start on a read by
	// name of what its start rests on (sequencer.GatherForPod), the cache
	// guessing only which names to read, and gated on it where it says no
	// in an enforcing namespace; where that read cannot be made, or in
	// audit, the tenant is read whole, as without it.
	Cache client.Reader
}

// Handle decides one pod creation. It only reads, so dry-run creates are
// side-effect free.
func (g *PodGate) Handle(ctx context.Context, req admission.Request) admission.Response {
	ctx = sequencer.WithCaller(ctx, sequencer.CallerPods)
	var pod corev1.Pod
	if err := json.Unmarshal(req.Object.Raw, &pod); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the pod: %w", err))
	}
	name := pod.Labels[v2alpha1.LabelNode]
	if heldBySequencer(pod) {
		// Held already — by this webhook, called again because a webhook
		// after it changed the pod (reinvocationPolicy IfNeeded): the
		// sequencer lets it go. Called again without the gate, the pod is
		// judged again: a webhook after this one that rewrote the
		// scheduling gates has dropped it. (A pod its client creates gated
		// is let through so too: in audit, where the sequencer lifts the
		// gate, it is not noted with what enforcing would have held it for.)
		return admission.Allowed("")
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"label %s=%q names no Express node (%s): the pod is not held for its prerequisites", v2alpha1.LabelNode, name, errs[0]))
	}
	deadline := time.Now().Add(freshReadTimeout)
	if g.Cache != nil {
		mayStart, held := g.readByName(ctx, req.Namespace, name, pod.Labels[v2alpha1.LabelTargetHash])
		switch {
		case mayStart:
			sequencer.CountPodAdmissionRead(true, false, rollout.Fallback{}, nil)
			return admission.Allowed("") // in audit too: nothing would have held it
		case held && pod.Spec.NodeName == "" && g.enforced(ctx, req.Namespace):
			sequencer.CountPodAdmissionRead(true, true, rollout.Fallback{}, nil)
			return hold(pod)
		case held:
			sequencer.CountPodAdmissionRead(false, true, rollout.Fallback{}, nil)
		}
	}
	read, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	started := time.Now()
	// In audit too: a pod enforcing would hold is noted (wouldHold).
	got := sequencer.ReadModeAndTenant(read, g.Reader, req.Namespace, name, "", g.DefaultMode, true, g.Orders, g.Clock.Now(), g.Grouping)
	sequencer.ObserveAdmissionStep("pods", "fresh_read", time.Since(started))
	snap, err := got.Tenant, got.TenantErr
	if got.Audit() {
		return g.wouldHold(pod, snap, err)
	}
	if err != nil && read.Err() != nil {
		// Say it before the API server's own deadline cuts the call short
		// with no word of why.
		return admission.Errored(http.StatusServiceUnavailable, fmt.Errorf(
			"the API server did not answer the fresh read of %s's tenant within %s of the pod's admission (is etcd stalled or the API server overloaded?): the pod is refused; its controller creates it again: %w",
			name, freshReadTimeout, err))
	}
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if snap == nil {
		return admission.Allowed("").WithWarnings(fmt.Sprintf(
			"label %s=%s names no Backend or Frontend in namespace %s: the pod is not held for its prerequisites", v2alpha1.LabelNode, name, req.Namespace))
	}
	started = time.Now()
	ok, why := rollout.PodMayStart(snap, name, pod.Labels[v2alpha1.LabelTargetHash])
	sequencer.ObserveAdmissionStep("pods", "decide", time.Since(started))
	if ok {
		return admission.Allowed("")
	}
	if pod.Spec.NodeName != "" {
		// The API server refuses a scheduling gate next to spec.nodeName: say
		// why the pod cannot start, rather than let it blame a field the
		// client set for a gate it never asked for.
		return admission.Denied(fmt.Sprintf(
			"spec.nodeName: pod %s of %s is bound to a machine, so it cannot wait scheduling-gated for its prerequisites, and it may not start yet: %s; create it once they are Ready, without spec.nodeName, or annotate %s %s=true",
			pod.GetName(), name, why, name, v2alpha1.AnnotationIgnorePrerequisites))
	}
	return hold(pod)
}

// heldBySequencer reports whether pod carries the sequencer's scheduling
// gate.
func heldBySequencer(pod corev1.Pod) bool {
	return slices.ContainsFunc(pod.Spec.SchedulingGates, func(s corev1.PodSchedulingGate) bool { return s.Name == v2alpha1.GateSequencer })
}

// hold admits pod scheduling-gated by the sequencer's gate, which the
// sequencer removes once its prerequisites are Ready.
func hold(pod corev1.Pod) admission.Response {
	if heldBySequencer(pod) {
		return admission.Allowed("")
	}
	op := jsonpatch.NewOperation("add", "/spec/schedulingGates/-", corev1.PodSchedulingGate{Name: v2alpha1.GateSequencer})
	if len(pod.Spec.SchedulingGates) == 0 {
		op = jsonpatch.NewOperation("add", "/spec/schedulingGates", []corev1.PodSchedulingGate{{Name: v2alpha1.GateSequencer}})
	}
	return admission.Patched("", op)
}

// readByName answers for new pods of node name on what their start rests
// on, read by name (sequencer.MayStartByName): mayStart where, read again
// unchanged, it lets them start — the whole tenant does too, in either
// mode; held where, read in full, it holds them. Holding is never out of
// order: a pod held that the whole tenant would let start (a half-done
// rollout's, which the read by name leaves to the sequencer) is let go by
// the sequencer's next plan, on the whole tenant. Neither is the answer
// where the read by name cannot be made or was not one moment: the tenant
// is read whole, and the read's fallback counted. It is given half the
// fresh read's time; the read of the whole tenant has what is left.
func (g *PodGate) readByName(ctx context.Context, namespace, name, hash string) (mayStart, held bool) {
	read, cancel := context.WithTimeout(ctx, freshReadTimeout/2)
	defer cancel()
	started := time.Now()
	ok, why, err := sequencer.MayStartByName(read, g.Cache, g.Reader, namespace, name, hash, g.Orders, g.Clock.Now(), g.Grouping)
	sequencer.ObserveAdmissionStep("pods", "scoped_read", time.Since(started))
	if !ok && (err != nil || !why.None()) {
		sequencer.CountPodAdmissionRead(false, false, why, err)
	}
	return ok, !ok && err == nil && why.None()
}

// enforced reports whether namespace is read, fresh, in enforcing mode: a
// pod held on the read by name is gated there without the whole tenant's
// read. In audit, or where the mode cannot be read, the tenant is read
// whole, as without --pod-reads-by-name: in audit to say what would have held
// the pod (wouldHold).
func (g *PodGate) enforced(ctx context.Context, namespace string) bool {
	read, cancel := context.WithTimeout(ctx, freshReadTimeout/2)
	defer cancel()
	mode, err := sequencer.ReadMode(read, g.Reader, namespace, g.DefaultMode)
	return err == nil && mode == v2alpha1.ModeEnforce
}

// wouldHold admits a pod in audit mode: nothing holds it, but a pod
// enforcing would have created scheduling-gated is annotated with what it
// would have waited for (AnnotationWouldHoldPod), for the order auditor to
// report the recovery enforcing would have held. A read that failed holds
// nothing and notes nothing.
func (g *PodGate) wouldHold(pod corev1.Pod, snap *rollout.Snapshot, readErr error) admission.Response {
	if readErr != nil || snap == nil {
		return admission.Allowed("")
	}
	ok, why := rollout.PodsMayStart(snap, pod.Labels[v2alpha1.LabelNode])
	if ok {
		return admission.Allowed("")
	}
	if len(pod.Annotations) == 0 {
		return admission.Patched("", jsonpatch.NewOperation("add", "/metadata/annotations", map[string]string{v2alpha1.AnnotationWouldHoldPod: why}))
	}
	return admission.Patched("", jsonpatch.NewOperation("add", sequencer.AnnotationPath(v2alpha1.AnnotationWouldHoldPod), why))
}
