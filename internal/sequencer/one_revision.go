package sequencer

import (
	"context"
	"fmt"
	"strconv"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// listed is one list of a fresh read: the list read, the options it was
// read with, and what it lists, for errors.
type listed struct {
	list client.ObjectList
	opts []client.ListOption
	what string
}

// atOneRevision makes lists, each a consistent list made at its own moment,
// one moment: each is listed again at the oldest of their resourceVersions
// (resourceVersionMatch Exact), unless it was read there. The API server
// answers a list at an exact revision from its watch cache's snapshot of
// that revision, or from etcd's: every object as it was then, none since.
// The oldest is as fresh as a consistent list: each list was asked for
// after the read began, and a consistent list holds every write made
// before it was asked for. And every watch cache has it already (each has
// served a list at it or after it), where the newest would have the others
// wait for it.
// It returns that revision, the moment the lists are read at; 0 from a
// reader that gives lists no resourceVersion (a fake client, an informer),
// whose lists are taken as they are: the API server always gives one.
//
// Revisions compare across kinds only where they are stored in one etcd,
// as they are unless the API server splits them (--etcd-servers-overrides):
// there the lists cannot be made one moment, which is not supported and
// cannot be told from here — a store whose revisions run ahead answers a
// list at the others' oldest from its own past, without an error; one
// behind times out, and the error says so.
func atOneRevision(ctx context.Context, r client.Reader, where string, lists []listed) (uint64, error) {
	var oldest uint64
	given := false
	revs := make([]uint64, len(lists))
	missing := -1 // a list without a resourceVersion
	for i, l := range lists {
		v := l.list.GetResourceVersion()
		if v == "" {
			missing = i
			continue
		}
		rev, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("listing %s in %s: resourceVersion %q is not a revision: %w", l.what, where, v, err)
		}
		revs[i] = rev
		if !given || rev < oldest {
			oldest, given = rev, true
		}
	}
	switch {
	case !given:
		return 0, nil
	case missing >= 0:
		return 0, fmt.Errorf("listing %s in %s: the list carries no resourceVersion where the others do, so they cannot be made one moment", lists[missing].what, where)
	}
	var g errgroup.Group
	for i, l := range lists {
		if revs[i] == oldest {
			continue
		}
		// One for each list: the client writes a list's selectors into it.
		at := &client.ListOptions{Raw: &metav1.ListOptions{
			ResourceVersion: strconv.FormatUint(oldest, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact,
		}}
		g.Go(func() error {
			err := r.List(ctx, l.list, append(append([]client.ListOption{}, l.opts...), at)...)
			if apierrors.IsTimeout(err) || apierrors.HasStatusCause(err, metav1.CauseTypeResourceVersionTooLarge) {
				return fmt.Errorf("listing %s in %s again at revision %d, that of the others: the API server did not answer at that revision in time — behind a load balancer of several API servers, one whose watch cache lags the others may have answered it; if the API server stores Backends, Frontends, pods and StatefulSets in different etcds (--etcd-servers-overrides), their revisions do not compare and the fresh read cannot be made one moment: %w", l.what, where, oldest, err)
			}
			if err != nil {
				return fmt.Errorf("listing %s in %s again at revision %d, that of the others: %w", l.what, where, oldest, err)
			}
			return nil
		})
	}
	return oldest, g.Wait()
}
