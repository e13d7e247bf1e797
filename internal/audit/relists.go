package audit

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// relistWatcher lists and watches one of the auditor's streams and tells
// the auditor of every list after the first: a watch that broke — a
// kube-apiserver restarted and answering 410 Gone to the old revision, a
// connection lost for longer than the watch cache keeps — is mended by a
// list, and client-go's reflector lists again without a word to the watch
// error handler. What happened between the last revision the broken watch
// delivered and the list's may be missing, and the list's objects reach
// the handlers in no order of revision.
type relistWatcher struct {
	*toolscache.ListWatch
	stream string
	// listed is called after each list, with the revision it was read at.
	listed func(stream string, rv uint64)
}

func newRelistWatcher(stream string, list func(context.Context, metav1.ListOptions) (runtime.Object, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error), listed func(string, uint64)) *relistWatcher {
	l := &relistWatcher{stream: stream, listed: listed}
	l.ListWatch = &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			out, err := list(ctx, o)
			if err != nil {
				return out, err
			}
			// A list comes in pages of one revision: the last says it.
			if m, err := meta.ListAccessor(out); err == nil && m.GetContinue() == "" {
				l.listed(l.stream, parseRevision(m.GetResourceVersion()))
			}
			return out, nil
		},
		WatchFuncWithContext: watchFn,
	}
	return l
}

// IsWatchListSemanticsUnSupported keeps the reflector on lists, which the
// wrapper sees, rather than a watch that streams the list (WatchListClient).
func (l *relistWatcher) IsWatchListSemanticsUnSupported() bool { return true }

// listed records a list of stream at revision rv. The first is the
// auditor's view beginning; each later one mends a broken watch: the
// revisions after the last one the informer had synced through, up to
// the list's, are blind (Judge.Blind) until the stream's handler has
// processed an event past the list — every object of the list before it.
func (a *Auditor) listed(stream string, rv uint64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.relisted(stream, lastSync(a.informers[stream]), rv)
}

// relisted records a list of stream at revision rv, its informer synced
// through revision synced before it. Called locked.
func (a *Auditor) relisted(stream string, synced, rv uint64) {
	a.listRV[stream] = rv
	if !a.listedOnce[stream] || stream == streamNamespaces {
		// The view's beginning; or namespaces, whose labels are read as
		// they are now, not judged by revision.
		a.listedOnce[stream] = true
		return
	}
	relists.WithLabelValues(stream).Inc()
	a.judge.Blind(stream, synced, rv)
}
