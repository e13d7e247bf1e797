package sequencer

import (
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// scopedReadsPause is how long the sequencer reads the whole tenant for
// every release after a webhook replica refused one planned on a scoped
// read as not judging releases (--recheck-releases=false): the replicas
// behind the webhook Service are not all alike, during a rolling update
// that turns the guard off or on, and the sequencer cannot tell which one
// its next write reaches.
const scopedReadsPause = 5 * time.Minute

// unjudgedReleases remembers when a webhook replica last refused a release
// planned on a scoped read (v2alpha1.CauseReleaseNotJudged).
type unjudgedReleases struct {
	mu   sync.Mutex
	last time.Time
}

// see notes err's refusal, if it is one, as seen at now.
func (u *unjudgedReleases) see(err error, now time.Time) {
	if !apierrors.HasStatusCause(err, v2alpha1.CauseReleaseNotJudged) {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	u.last = now
}

// why returns why releases are not planned on a scoped read at now, "" when
// they may be.
func (u *unjudgedReleases) why(now time.Time) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.last.IsZero() || now.Sub(u.last) >= scopedReadsPause {
		return ""
	}
	return fmt.Sprintf("a webhook replica refused a release planned on a scoped read %s ago, as one run with --recheck-releases=false (the tenant is read whole for %s after such a refusal)",
		now.Sub(u.last).Round(time.Second), scopedReadsPause)
}
