package sequencer

import (
	"context"
	"fmt"
	"strconv"

	"golang.org/x/sync/errgroup"
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
// one moment: each is listed again at the newest of their resourceVersions
// (resourceVersionMatch Exact), unless it was read there. The API server
// answers a list at an exact revision from its watch cache's snapshot of
// that revision, or from etcd's: every object as it was then, none since.
// A reader that gives lists no resourceVersion (a fake client) is taken as
// it is: the API server always gives one.
func atOneRevision(ctx context.Context, r client.Reader, where string, lists []listed) error {
	var newest uint64
	revs := make([]uint64, len(lists))
	for i, l := range lists {
		v := l.list.GetResourceVersion()
		if v == "" {
			return nil
		}
		rev, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return fmt.Errorf("listing %s in %s: resourceVersion %q is not a revision: %w", l.what, where, v, err)
		}
		revs[i], newest = rev, max(newest, rev)
	}
	var g errgroup.Group
	for i, l := range lists {
		if revs[i] == newest {
			continue
		}
		// One for each list: the client writes a list's selectors into it.
		at := &client.ListOptions{Raw: &metav1.ListOptions{
			ResourceVersion: strconv.FormatUint(newest, 10), ResourceVersionMatch: metav1.ResourceVersionMatchExact,
		}}
		g.Go(func() error {
			if err := r.List(ctx, l.list, append(append([]client.ListOption{}, l.opts...), at)...); err != nil {
				return fmt.Errorf("listing %s in %s again at revision %d, that of the others: %w", l.what, where, newest, err)
			}
			return nil
		})
	}
	return g.Wait()
}
