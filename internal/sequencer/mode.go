package sequencer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// ModeOf is the sequencing mode of a namespace (DESIGN §9): its
// express.medallia.com/sequencing label, or def when it has none. Any value
// but "audit" enforces: a mistyped label holds rather than lets go.
func ModeOf(ns *corev1.Namespace, def string) string {
	m, ok := ns.Labels[v2alpha1.LabelSequencing]
	if !ok {
		m = def
	}
	if m == v2alpha1.ModeAudit {
		return v2alpha1.ModeAudit
	}
	return v2alpha1.ModeEnforce
}

// ReadMode reads namespace ns with r and returns its mode; a namespace
// that is gone has the default.
func ReadMode(ctx context.Context, r client.Reader, ns, def string) (string, error) {
	var n corev1.Namespace
	if err := r.Get(ctx, client.ObjectKey{Name: ns}, &n); apierrors.IsNotFound(err) {
		return ModeOf(&n, def), nil
	} else if err != nil {
		return "", fmt.Errorf("reading the sequencing mode of namespace %s: %w", ns, err)
	}
	return ModeOf(&n, def), nil
}
