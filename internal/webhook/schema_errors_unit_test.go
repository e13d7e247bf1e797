package webhook

import (
	"context"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/scheme"
)

// A key our types know only in another case (`Up`, `tenantId`) is no field
// of ours to the case-sensitive decoder the defaulter uses: the defaulter
// admits it as before. Only what the defaulter refuses as undecodable is
// answered as the API server would, 422 Invalid.
func TestOnlyWhatTheDefaultersDecoderRefusesIsAnsweredAsATypeError(t *testing.T) {
	inner := admission.WithDefaulter[*v2alpha1.Frontend](scheme.New(), &Defaulter[*v2alpha1.Frontend]{
		Orders: defaults.Builtin(), Decoder: admission.NewDecoder(scheme.New()), Clock: clock.RealClock{}}).Handler
	h := withSchemaErrors(v2alpha1.KindFrontend, inner)
	for _, c := range []struct {
		name, object string
		allowed      bool
	}{
		{"a key that differs from ours in case only", `{"apiVersion":"express.medallia.com/v2alpha1","kind":"Frontend","metadata":{"name":"acme-fe1","namespace":"t"},"spec":{"Up":"yes","clusterConfig":{"clusterName":"acme","tenantId":123634},"expressVersion":"v1"}}`, true},
		{"our key with the wrong type", `{"apiVersion":"express.medallia.com/v2alpha1","kind":"Frontend","metadata":{"name":"acme-fe1","namespace":"t"},"spec":{"up":"yes"}}`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			resp := h.Handle(context.Background(), admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
				Operation: admissionv1.Create, Name: "acme-fe1", Object: runtime.RawExtension{Raw: []byte(c.object)},
			}})
			assert.Equal(t, c.allowed, resp.Allowed, "%+v", resp.Result)
			if !c.allowed {
				assert.Equal(t, int32(http.StatusUnprocessableEntity), resp.Result.Code, "422 Invalid, not the decoder's 400")
			}
		})
	}
}
