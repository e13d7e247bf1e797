package conformance

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// couldNotJudge reports whether err, which ended a clause, is the kit's
// own trouble rather than the operator's breaking a rule: the run
// cancelled or out of time (ctx done), the kit's credentials refused (401,
// or 403 by authorization or a quota — a denial by an admission webhook is
// the cluster's answer to the change, which may be the operator's own), or
// the API server not reached. Any other error fails the clause, as before:
// a clause's evidence wraps no such error.
func couldNotJudge(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return true
	}
	if apierrors.IsUnauthorized(err) {
		return true
	}
	if apierrors.IsForbidden(err) {
		return !strings.Contains(err.Error(), "admission webhook")
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return false
	}
	var urlErr *url.Error
	var netErr net.Error
	return errors.As(err, &urlErr) || errors.As(err, &netErr)
}
