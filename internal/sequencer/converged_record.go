package sequencer

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/rollout"
)

// convergedRecordPatch writes, for gated node n, that the rollout of its latest
// release converged (Decision.RecordConverged): its own entry joins
// released-after, in a JSON patch that tests its UID and the release's
// generation — the record is of that release, and a release since (a
// replica's, written meanwhile) makes it fail and the tenant be planned
// again. A rollout that converged stays converged: a late write of it,
// from a replica frozen since its read, is still true.
func convergedRecordPatch(n v2alpha1.Node) (client.Patch, error) {
	ann := n.GetAnnotations()
	generation, ok := ann[v2alpha1.AnnotationReleasedGeneration]
	if !ok {
		return nil, fmt.Errorf("recording %s converged: it carries no %s", n.GetName(), v2alpha1.AnnotationReleasedGeneration)
	}
	after := map[string]string{}
	if raw := ann[v2alpha1.AnnotationReleasedAfter]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &after); err != nil {
			return nil, fmt.Errorf("recording %s converged: reading its %s: %w", n.GetName(), v2alpha1.AnnotationReleasedAfter, err)
		}
	}
	after[n.GetName()] = string(n.GetUID()) + "/" + generation
	data, err := json.Marshal(after)
	if err != nil {
		return nil, fmt.Errorf("encoding the %s record of %s: %w", v2alpha1.AnnotationReleasedAfter, n.GetName(), err)
	}
	ops := []map[string]any{
		{"op": "test", "path": "/metadata/uid", "value": n.GetUID()},
		{"op": "test", "path": AnnotationPath(v2alpha1.AnnotationReleasedGeneration), "value": generation},
		{"op": "test", "path": AnnotationPath(v2alpha1.AnnotationReleasedTarget), "value": rollout.ReleasedTarget(n)},
		{"op": "add", "path": AnnotationPath(v2alpha1.AnnotationReleasedAfter), "value": string(data)},
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encoding the convergence record patch of %s: %w", n.GetName(), err)
	}
	return client.RawPatch(types.JSONPatchType, patch), nil
}

// recordConverged applies convergedRecordPatch(n) as the sequencer's field
// manager and returns the node as stored.
func (r *Reconciler) recordConverged(ctx context.Context, n v2alpha1.Node) (v2alpha1.Node, error) {
	patch, err := convergedRecordPatch(n)
	if err != nil {
		return nil, err
	}
	apiWrites.WithLabelValues("patch", resourceOf(n)).Inc()
	patched := v2alpha1.NewNode(n.NodeKind())
	patched.SetName(n.GetName())
	patched.SetNamespace(n.GetNamespace())
	if err := r.Client.Patch(ctx, patched, patch, client.FieldOwner(v2alpha1.FieldManager)); err != nil {
		return nil, fmt.Errorf("recording the converged rollout of %s %s: %w", n.NodeKind(), n.GetName(), err)
	}
	convergenceRecords.Inc()
	return patched, nil
}
