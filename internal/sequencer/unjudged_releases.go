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
// read as not judging releases (--recheck-releases=false), or one of an
// earlier version undid it: the replicas
// behind the webhook Service are not all alike, during a rolling update
// that turns the guard off or on, and the sequencer cannot tell which one
// its next write reaches.
const scopedReadsPause = 5 * time.Minute

// unjudgedReleases remembers when a webhook replica last refused a release
// planned on a scoped read (v2alpha1.CauseReleaseNotJudged), or a mutating
// webhook last undid one, and why.
type unjudgedReleases struct {
	mu     sync.Mutex
	last   time.Time
	reason string
}

// see notes err's refusal, if it is one, as seen at now.
func (u *unjudgedReleases) see(err error, now time.Time) {
	if apierrors.HasStatusCause(err, v2alpha1.CauseReleaseNotJudged) {
		u.note(now, "a webhook replica refused a release planned on a scoped read, as one run with --recheck-releases=false")
	}
}

// undone notes, at now, a release planned on a scoped read that a mutating
// webhook undid: one of an earlier version, during a rolling update, takes
// the field manager for someone else's and puts the gate back; it lets a
// release written as the sequencer's own through.
func (u *unjudgedReleases) undone(now time.Time) {
	u.note(now, "a mutating webhook put back the gate a release planned on a scoped read removed (one of an earlier version?)")
}

func (u *unjudgedReleases) note(now time.Time, why string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.last, u.reason = now, why
}

// why returns why releases are not planned on a scoped read at now, "" when
// they may be.
func (u *unjudgedReleases) why(now time.Time) string {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.last.IsZero() || now.Sub(u.last) >= scopedReadsPause {
		return ""
	}
	return fmt.Sprintf("%s %s ago (the tenant is read whole for %s after that)", u.reason, now.Sub(u.last).Round(time.Second), scopedReadsPause)
}
