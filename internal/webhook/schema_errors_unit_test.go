package webhook

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// A key our types know only in another case (`Up`, `tenantId`) is no field
// of ours to the case-sensitive decoder the defaulter uses: the request goes
// on to it as before, not refused for that key's type.
func TestOnlyWhatTheDefaultersDecoderRefusesIsAnsweredAsATypeError(t *testing.T) {
	inner := admission.HandlerFunc(func(context.Context, admission.Request) admission.Response { return admission.Allowed("") })
	h := withSchemaErrors(v2alpha1.KindFrontend, inner)
	for _, c := range []struct {
		name, object string
		allowed      bool
	}{
		{"a key that differs from ours in case only", `{"spec":{"Up":"yes","clusterConfig":{"tenantId":123634}}}`, true},
		{"our key with the wrong type", `{"spec":{"up":"yes"}}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Name: "acme-fe1", Object: runtime.RawExtension{Raw: []byte(c.object)},
			}})
			assert.Equal(t, c.allowed, resp.Allowed, "%+v", resp.Result)
		})
	}
}
