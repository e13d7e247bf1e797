package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// withSchemaErrors returns h, answering a node whose fields do not have
// their API types (`up: "yes"`) the way the API server's own schema
// validation would, naming the field in Kubernetes' words
// (`spec.up: Invalid value: "string": must be of type boolean`), instead
// of in Go's, which controller-runtime's decoder gives. Mutating admission
// runs before the API server's schema validation, so without this a user
// reads a Go struct's name. Only a request h itself refused as undecodable
// (400) is answered so — refused either way, never let through without its
// defaults and gate — and only it is decoded a second time, with
// encoding/json, whose error names the field and the type. The path has no
// list indices (Go's decoder gives none):
// spec.deploymentDependencies.upgradePrerequisites.kind.
func withSchemaErrors(kind string, h admission.Handler) admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		resp := h.Handle(ctx, req)
		if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest {
			return resp
		}
		var typeErr *json.UnmarshalTypeError
		if err := json.Unmarshal(req.Object.Raw, v2alpha1.NewNode(kind)); errors.As(err, &typeErr) && typeErr.Field != "" {
			return invalidType(kind, req.Name, typeErr)
		}
		return resp
	})
}

// invalidType is the API server's answer to a field of the wrong type: 422
// Invalid, the field path and the type the schema wants.
func invalidType(kind, name string, e *json.UnmarshalTypeError) admission.Response {
	path := field.NewPath(e.Field)
	status := apierrors.NewInvalid(schema.GroupKind{Group: v2alpha1.GroupVersion.Group, Kind: kind}, name, field.ErrorList{
		field.Invalid(path, e.Value, "must be of type "+jsonType(e.Type)),
	}).Status()
	return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{Allowed: false, Result: &status}}
}

// jsonType names a Go type as OpenAPI names the JSON type it decodes from.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Bool:
		return "boolean"
	case reflect.String:
		return "string"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		return "array"
	default:
		return "object"
	}
}
