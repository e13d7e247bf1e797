package webhook

import (
	"context"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// controller-runtime's Defaulter returns no admission warnings; the mutating
// webhook collects them in the request's context and adds them to the
// response, so kubectl and Helm print them like the validating webhook's.

type warningsKey struct{}

type collected struct {
	mu   sync.Mutex
	list []string
}

// warn adds an admission warning to the response of the request in ctx.
func warn(ctx context.Context, msg string) {
	if c, ok := ctx.Value(warningsKey{}).(*collected); ok {
		c.mu.Lock()
		c.list = append(c.list, msg)
		c.mu.Unlock()
	}
}

// withWarnings returns h, answering with the warnings its handler collected.
func withWarnings(h admission.Handler) admission.Handler {
	return admission.HandlerFunc(func(ctx context.Context, req admission.Request) admission.Response {
		c := &collected{}
		resp := h.Handle(context.WithValue(ctx, warningsKey{}, c), req)
		resp.Warnings = append(resp.Warnings, c.list...)
		return resp
	})
}
