package webhook

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// ReleaseGuard judges a release again as the API server is about to store
// it: the removal of the sequencer's gate from a node, or of its scheduling
// gate from an Express pod. It reads the tenant straight from the API server
// and lets the release through only if Plan, on the tenant as it is now,
// releases it too (rollout.ReleaseStands). A sequencer decides on state read
// an instant before it writes; a replica frozen between its read and its
// write (stopped, starved, a leader whose lease passed on meanwhile) writes
// on state that may have changed since. Kubernetes has no write conditioned
// on another object; this check, made in the write's own admission, is the
// nearest thing: the write is refused with the reason, and the sequencer
// plans again.
type ReleaseGuard struct {
	// Reader reads the tenant straight from the API server.
	Reader client.Reader
	// Orders are the installation's default orders.
	Orders defaults.Orders
	// Grouping is the sequencer's change grouping: the guard judges with
	// the sequencer's own rule and settings, so that a release the sequencer
	// makes on the state of the moment stands (a hold for a change landing
	// or settling ends at the same instant for both). A sequencer and
	// webhooks run apart must be given the same --settle-time,
	// --settle-cap and --landing-timeout.
	Grouping rollout.Grouping
	// Clock dates the snapshot.
	Clock clock.PassiveClock
	// DefaultMode is the mode of a namespace without the sequencing label:
	// in audit every release stands (nothing is held).
	DefaultMode string
}

// nodeRelease refuses the removal of node n's gate unless it stands.
func (g *ReleaseGuard) nodeRelease(ctx context.Context, n v2alpha1.Node) error {
	gr := schema.GroupResource{Group: v2alpha1.GroupVersion.Group, Resource: resourceOf(n)}
	why, err := g.stands(ctx, n.GetNamespace(), n.GetName(), n.NodeKind(), "")
	switch {
	case err != nil:
		return err
	case why != "":
		return apierrors.NewConflict(gr, n.GetName(), fmt.Errorf(
			"spec.rolloutGates: the release of %s does not stand on the tenant as it is now: %s; express-sequencer plans it again", n.GetName(), why))
	}
	return nil
}

// recordWithoutGate refuses, in an enforce namespace, a release the
// sequencer records without removing a gate (target released on a node that
// was and stays ungated) unless the node already runs that target: an
// adoption, the write that carries a node audit mode left rolling into
// enforce. In audit such records are the plan's (nothing is gated). A
// sequencer that read the namespace in audit and writes after it was
// switched to enforce would otherwise mark as released a node never let go,
// and nothing would gate it again.
func (g *ReleaseGuard) recordWithoutGate(ctx context.Context, n v2alpha1.Node, target string) error {
	read, cancel := context.WithTimeout(sequencer.WithCaller(ctx, sequencer.CallerReleaseGuard), freshReadTimeout)
	defer cancel()
	mode, err := sequencer.ReadMode(read, g.Reader, n.GetNamespace(), g.DefaultMode)
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("reading the sequencing mode to judge the release record of %s: %v", n.GetName(), err))
	}
	if mode == v2alpha1.ModeAudit {
		return nil
	}
	snap, err := sequencer.GatherFreshFor(read, g.Reader, n.GetNamespace(), n.GetName(), n.NodeKind(), g.Orders, g.Clock.Now(), g.Grouping)
	if err != nil {
		return apierrors.NewServiceUnavailable(fmt.Sprintf("reading %s's tenant to judge its release record: %v", n.GetName(), err))
	}
	if snap != nil && rollout.RunsTarget(snap, n.GetName(), target) {
		return nil
	}
	gr := schema.GroupResource{Group: v2alpha1.GroupVersion.Group, Resource: resourceOf(n)}
	return apierrors.NewConflict(gr, n.GetName(), fmt.Errorf(
		"metadata.annotations[%s]: %s is in an enforce namespace and nothing of it runs target %s yet: a release is recorded only with the removal of its gate; express-sequencer plans it again",
		v2alpha1.AnnotationReleasedTarget, n.GetName(), target))
}

// stands reads the tenant of node name of kind (either kind for a pod) and
// returns why its release (of pod, when set) does not stand now, or "" when
// it does.
func (g *ReleaseGuard) stands(ctx context.Context, namespace, name, kind, pod string) (string, error) {
	read, cancel := context.WithTimeout(sequencer.WithCaller(ctx, sequencer.CallerReleaseGuard), freshReadTimeout)
	defer cancel()
	started := time.Now()
	got := sequencer.ReadModeAndTenant(read, g.Reader, namespace, name, kind, g.DefaultMode, false, g.Orders, g.Clock.Now(), g.Grouping)
	sequencer.ObserveAdmissionStep("release-guard", "fresh_read", time.Since(started))
	if got.Audit() {
		return "", nil // audit holds nothing: the sequencer lifts what enforce left
	}
	snap, err := got.Tenant, got.TenantErr
	if err != nil && read.Err() != nil {
		return "", apierrors.NewServiceUnavailable(fmt.Sprintf(
			"the API server did not answer the fresh read of %s's tenant within %s (is etcd stalled or the API server overloaded?): the release is refused; express-sequencer plans it again: %v",
			name, freshReadTimeout, err))
	}
	if err != nil {
		return "", apierrors.NewInternalError(fmt.Errorf("reading %s's tenant to judge its release: %w", name, err))
	}
	if snap == nil {
		return "", nil // no such node: nothing orders it
	}
	started = time.Now()
	ok, why := rollout.ReleaseStands(snap, name, pod)
	sequencer.ObserveAdmissionStep("release-guard", "decide", time.Since(started))
	if !ok {
		return why, nil
	}
	return "", nil
}

// notJudged refuses, in a webhook replica that does not judge releases
// (--recheck-releases=false), a release the sequencer planned on a scoped
// read (field manager v2alpha1.FieldManagerGuardedRelease): it rests on the
// guard's read of the whole tenant, which this replica does not make. The
// sequencer reads the tenant whole and plans it again. Without this, a
// replica rolled out with the guard turned off would let such a release
// through unjudged, since the sequencer cannot see the setting of the replica
// its write reaches.
func notJudged(gr schema.GroupResource, name string) *apierrors.StatusError {
	err := apierrors.NewConflict(gr, name, fmt.Errorf(
		"this express-sequencer webhook replica runs with --recheck-releases=false and does not judge releases; "+
			"this one was planned on a scoped read (field manager %s) and rests on that judgement: refused; express-sequencer reads the tenant whole and plans it again",
		v2alpha1.FieldManagerGuardedRelease))
	err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{
		Type: v2alpha1.CauseReleaseNotJudged, Message: "the release guard is off in this webhook replica",
	})
	return err
}

// resourceOf is the API resource of a node.
func resourceOf(n v2alpha1.Node) string {
	if n.NodeKind() == v2alpha1.KindBackend {
		return "backends"
	}
	return "frontends"
}
