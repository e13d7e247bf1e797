package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/rollout"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// Defaulter is the mutating webhook of one node kind: it injects the
// operator's default prerequisites, stamps the node's target hash, and puts
// the sequencer's gate on a node whose rollout target changed.
type Defaulter[T v2alpha1.Node] struct {
	// Orders are the installation's default orders.
	Orders defaults.Orders
	// Decoder decodes the old object of an update.
	Decoder admission.Decoder
	// Clock stamps the time of a target change.
	Clock clock.PassiveClock
	// SettleTime is the sequencer's settle time: it tells a node's run of
	// target changes (each less than it after the one before) from a new one.
	SettleTime time.Duration
	// Sequencer are the identities (admission user names) the sequencer
	// writes as: only a request from one of them, as field manager
	// express-sequencer, may remove the gate or record a release.
	Sequencer []string
	// Modes reads the node's namespace straight from the API server, for
	// its sequencing mode: in audit no gate is added.
	Modes client.Reader
	// DefaultMode is the mode of a namespace without the label.
	DefaultMode string
}

// Default mutates the admitted node in place; the framework turns the
// difference into a JSON patch that never removes a field (so fields our
// types do not model survive), or no patch when nothing changed. The target
// hash is taken from the raw request, so those fields count as target too.
func (d *Defaulter[T]) Default(ctx context.Context, obj T) error {
	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return fmt.Errorf("reading admission request: %w", err)
	}
	var old v2alpha1.Node
	if req.Operation != admissionv1.Create {
		stored := reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T)
		if err := d.Decoder.DecodeRaw(req.OldObject, stored); err != nil {
			return fmt.Errorf("decoding the stored %s: %w", obj.NodeKind(), err)
		}
		old = stored
	}
	defaults.RestoreRecord(obj, old)
	d.Orders.Apply(obj)

	manager := fieldManager(req)
	a := rollout.Admission{FromSequencer: sequencerManager(manager) && slices.Contains(d.Sequencer, req.UserInfo.Username), Now: d.Clock.Now(), SettleTime: d.SettleTime}
	if sequencerManager(manager) && !a.FromSequencer {
		warn(ctx, fmt.Sprintf("%s is not express-sequencer's identity: field manager %s gives it no right to release a node", req.UserInfo.Username, manager))
	}
	if a.Hash, err = rollout.TargetHashOfObject(req.Object.Raw); err != nil {
		return err
	}
	if old != nil {
		a.Old = old
		if a.OldHash, err = rollout.TargetHashOfObject(req.OldObject.Raw); err != nil {
			return err
		}
	}
	for _, w := range rollout.Admit(obj, a) {
		warn(ctx, w)
	}
	if obj.NodeSpec().HasGate(v2alpha1.GateSequencer) && (old == nil || !old.NodeSpec().HasGate(v2alpha1.GateSequencer)) && d.Modes != nil {
		// The gate goes on only where the namespace enforces. A mode that
		// cannot be read enforces: a hold, never a rollout out of order.
		mode, err := sequencer.ReadMode(ctx, d.Modes, obj.GetNamespace(), d.DefaultMode)
		switch {
		case err != nil:
			warn(ctx, fmt.Sprintf("%v: gated as in enforce mode", err))
		case mode == v2alpha1.ModeAudit:
			obj.NodeSpec().RemoveGate(v2alpha1.GateSequencer)
		}
	}
	return nil
}

// fieldManager returns the field manager of an update or patch request.
func fieldManager(req admission.Request) string {
	var opts metav1.UpdateOptions // PatchOptions carries fieldManager under the same key
	if len(req.Options.Raw) == 0 || json.Unmarshal(req.Options.Raw, &opts) != nil {
		return ""
	}
	return opts.FieldManager
}

// sequencerManager reports whether m is a field manager express-sequencer
// writes a node's or a pod's gate with: its own, or the one of a release
// planned on a scoped read.
func sequencerManager(m string) bool {
	return m == v2alpha1.FieldManager || m == v2alpha1.FieldManagerGuardedRelease
}
