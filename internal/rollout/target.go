package rollout

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// orderingFields are the spec fields that say how to order a rollout, not
// what to roll out: they are not part of the rollout target.
var orderingFields = []string{"deploymentDependencies", "rolloutGates", "up"}

// targetHashLength is how many hex digits of the SHA-256 a hash keeps: 64
// bits, short enough for a label value.
const targetHashLength = 16

// TargetHash returns the rollout target identity of a node from its raw spec
// as admitted: every field, known to our Go types or not, except
// deploymentDependencies, rolloutGates and up, in canonical JSON (object keys
// sorted, numbers as written), hashed. Key order and formatting do not
// change it; any other change to any field does.
func TargetHash(rawSpec []byte) (string, error) {
	spec := map[string]any{}
	if len(bytes.TrimSpace(rawSpec)) > 0 && !bytes.Equal(bytes.TrimSpace(rawSpec), []byte("null")) {
		dec := json.NewDecoder(bytes.NewReader(rawSpec))
		dec.UseNumber()
		if err := dec.Decode(&spec); err != nil {
			return "", fmt.Errorf("reading the spec: %w", err)
		}
	}
	for _, f := range orderingFields {
		delete(spec, f)
	}
	canonical, err := json.Marshal(spec) // maps marshal with sorted keys
	if err != nil {
		return "", fmt.Errorf("encoding the spec: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])[:targetHashLength], nil
}

// TargetHashOfObject hashes the spec of a raw (JSON) object, as the
// webhook stamps it.
func TargetHashOfObject(rawObject []byte) (string, error) {
	spec, err := SpecOf(rawObject)
	if err != nil {
		return "", err
	}
	return TargetHash(spec)
}

// SpecOf returns the raw spec of a raw object, nil when it has none.
func SpecOf(rawObject []byte) ([]byte, error) {
	var obj struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(rawObject, &obj); err != nil {
		return nil, fmt.Errorf("reading the object: %w", err)
	}
	return obj.Spec, nil
}

// TargetHashOf hashes a typed spec the way the webhook hashes the raw one
// (for tools and tests that hold only typed objects: fields the Go types do
// not model are not seen).
func TargetHashOf(s *v2alpha1.NodeSpec) string {
	raw, _ := json.Marshal(s) // a NodeSpec always marshals
	h, _ := TargetHash(raw)   // and what it marshals always parses
	return h
}

// StampedTarget returns the node's target hash as the webhook stamped it.
func StampedTarget(n v2alpha1.Node) string { return n.GetAnnotations()[v2alpha1.AnnotationTargetHash] }

// ReleasedTarget returns the target hash the node was last released for.
func ReleasedTarget(n v2alpha1.Node) string {
	return n.GetAnnotations()[v2alpha1.AnnotationReleasedTarget]
}
