package sequencer

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// ModeOf is the sequencing mode of namespace ns (v2alpha1.SequencingMode),
// def when it has no label.
func ModeOf(ns *corev1.Namespace, def string) string {
	return v2alpha1.SequencingMode(ns.Labels, def)
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
