package webhook

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/defaults"
	"github.com/medallia/express-sequencer/sequencer"
)

// Defaulter is the mutating webhook of one node kind: it injects the
// operator's default prerequisites and puts the sequencer's gate on a node
// whose rollout target changed.
type Defaulter[T v2alpha1.Node] struct {
	// Orders are the installation's default orders.
	Orders defaults.Orders
	// Decoder decodes the old object of an update.
	Decoder admission.Decoder
	// Clock stamps the time of a target change.
	Clock clock.PassiveClock
}

// Default mutates the admitted node in place; the framework turns the
// difference into a JSON patch, or no patch when nothing changed.
func (d *Defaulter[T]) Default(ctx context.Context, obj T) error {
	d.Orders.Apply(obj)

	req, err := admission.RequestFromContext(ctx)
	if err != nil {
		return fmt.Errorf("reading admission request: %w", err)
	}
	if obj.GetDeletionTimestamp() != nil {
		return nil // a node being deleted is not rolled out again
	}
	spec := obj.NodeSpec()
	var oldSpec *v2alpha1.NodeSpec
	if req.Operation != admissionv1.Create {
		old := reflect.New(reflect.TypeFor[T]().Elem()).Interface().(T)
		if err := d.Decoder.DecodeRaw(req.OldObject, old); err != nil {
			return fmt.Errorf("decoding the stored %s: %w", obj.NodeKind(), err)
		}
		oldSpec = old.NodeSpec()
	}
	switch {
	case sequencer.AdmissionNeedsGate(oldSpec, spec):
		spec.AddGate(v2alpha1.GateSequencer)
		ann := obj.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		ann[v2alpha1.AnnotationTargetChangedAt] = d.Clock.Now().UTC().Format(time.RFC3339Nano)
		obj.SetAnnotations(ann)
	case oldSpec != nil && sequencer.AdmissionKeepsGate(oldSpec, spec, fieldManager(req)):
		spec.AddGate(v2alpha1.GateSequencer)
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
