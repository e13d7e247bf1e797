package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
)

func review(t testing.TB, op admissionv1.Operation, kind string, obj, old any) []byte {
	raw := func(v any) runtime.RawExtension {
		if v == nil {
			return runtime.RawExtension{}
		}
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return runtime.RawExtension{Raw: b}
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "fuzz",
			Kind:      metav1.GroupVersionKind{Group: v2alpha1.GroupVersion.Group, Version: v2alpha1.GroupVersion.Version, Kind: kind},
			Resource:  metav1.GroupVersionResource{Group: v2alpha1.GroupVersion.Group, Version: v2alpha1.GroupVersion.Version, Resource: "frontends"},
			Name:      "acme-fe1",
			Namespace: "tenant",
			Operation: op,
			Object:    raw(obj),
			OldObject: raw(old),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzAdmissionReview sends arbitrary bodies to every admission handler: none
// may panic, and every answer must be a well-formed AdmissionReview.
func FuzzAdmissionReview(f *testing.F) {
	fe := map[string]any{
		"apiVersion": "express.medallia.com/v2alpha1", "kind": "Frontend",
		"metadata": map[string]any{"name": "acme-fe1", "namespace": "tenant"},
		"spec": map[string]any{"clusterConfig": map[string]any{"clusterName": "acme"}, "expressVersion": "express-e689.151",
			"deploymentDependencies": map[string]any{"provisioningPrerequisites": []any{map[string]any{"expressNode": "acme-fe1", "kind": "Frontend"}}}},
	}
	be := map[string]any{"apiVersion": "express.medallia.com/v2alpha1", "kind": "Backend",
		"metadata": map[string]any{"name": "acme-be"}, "spec": map[string]any{"clusterConfig": map[string]any{"clusterName": "acme"}}}
	f.Add(review(f, admissionv1.Create, "Frontend", fe, nil))
	f.Add(review(f, admissionv1.Update, "Frontend", fe, fe))
	f.Add(review(f, admissionv1.Update, "Backend", be, fe))
	f.Add(review(f, admissionv1.Delete, "Backend", nil, be))
	f.Add(review(f, admissionv1.Create, "Backend", "not an object", nil))
	f.Add([]byte(`{"request":{"uid":"x","operation":"CREATE","object":{"spec":{"rolloutGates":[{"name":""}],"up":"yes"}}}}`))
	f.Add([]byte(`{`))
	f.Add([]byte{})

	scheme := runtime.NewScheme()
	if err := v2alpha1.AddToScheme(scheme); err != nil {
		f.Fatal(err)
	}
	reader := fake.NewClientBuilder().WithScheme(scheme).Build()
	handlers := Handlers(scheme, reader, reader, Settings{Orders: defaults.Builtin(), Clock: clock.RealClock{}, SequencerUsers: []string{"express-sequencer"}})
	f.Fuzz(func(t *testing.T, body []byte) {
		for path, h := range handlers {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			h.ServeHTTP(rec, req)

			var out admissionv1.AdmissionReview
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("%s answered %q, not an AdmissionReview: %v", path, rec.Body.String(), err)
			}
			if out.Response == nil {
				t.Fatalf("%s answered without a response: %s", path, rec.Body.String())
			}
			if !out.Response.Allowed && out.Response.Result == nil {
				t.Fatalf("%s denied without saying why: %s", path, rec.Body.String())
			}
			if out.Response.PatchType != nil && len(out.Response.Patch) == 0 {
				t.Fatalf("%s announced a patch and sent none", path)
			}
		}
	})
}
