package sequencer_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/medallia/express-sequencer/internal/scheme"
)

// versionedStore is a client.Reader that answers as the API server does
// over etcd's revisions, for property tests of reads made one moment: every
// write makes a new revision and gives the object written that
// resourceVersion; a Get answers the object as it is now; a List answers
// every object of its kind as it is now, carrying the current revision —
// or, with resourceVersionMatch Exact, as it was at the revision asked for.
// Before answering any read it runs between, and after it after, which may
// write: the reads of one decision are each at their own moment, as on a
// busy API server. An object created gets a UID and a creation time; a
// deletion is immediate (no finalizers, no graceful deletion); a list at
// a revision to come is refused as too large, and one with options the
// store does not model (fields but the name, pages) is refused too.
type versionedStore struct {
	mu      sync.Mutex
	rev     uint64
	history map[storedKey][]storedVersion
	scheme  *runtime.Scheme
	// between runs before each read is answered, outside the lock, with
	// what a Get asks for (nil for a List).
	between func(s *versionedStore, asked client.Object)
	// after runs after each read is answered, outside the lock, with the
	// object a Get found, nil where it found none or for a List, and what
	// was asked for.
	after func(s *versionedStore, asked client.Object, found client.Object)
	// log says what each revision wrote, for a failure's message.
	log []string
}

// storeEpoch is when a versionedStore's revision 0 was written.
var storeEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

type storedKey struct {
	kind      schema.GroupVersionKind
	namespace string
	name      string
}

// storedVersion is an object as written at revision rev; nil is a deletion.
type storedVersion struct {
	rev uint64
	obj client.Object
}

func newVersionedStore(objects ...client.Object) *versionedStore {
	s := &versionedStore{history: map[storedKey][]storedVersion{}, scheme: scheme.New()}
	for _, o := range objects {
		s.write(o)
	}
	return s
}

func (s *versionedStore) keyOf(o client.Object) storedKey {
	gvk, err := apiutil.GVKForObject(o, s.scheme)
	if err != nil {
		panic(err)
	}
	return storedKey{gvk, o.GetNamespace(), o.GetName()}
}

// write stores a copy of o at a new revision and returns that revision.
func (s *versionedStore) write(o client.Object) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	c := o.DeepCopyObject().(client.Object)
	c.SetResourceVersion(strconv.FormatUint(s.rev, 10))
	k := s.keyOf(c)
	// As the API server does: an object created gets a UID (unless the
	// test gave it one) and its creation time, here a second per revision;
	// one updated keeps both.
	if stored := s.at(k, s.rev); stored != nil {
		c.SetUID(stored.GetUID())
		c.SetCreationTimestamp(stored.GetCreationTimestamp())
	} else {
		if c.GetUID() == "" {
			c.SetUID(types.UID(fmt.Sprintf("uid-%d", s.rev)))
		}
		c.SetCreationTimestamp(metav1.NewTime(storeEpoch.Add(time.Duration(s.rev) * time.Second)))
	}
	s.history[k] = append(s.history[k], storedVersion{s.rev, c})
	s.log = append(s.log, fmt.Sprintf("%d: wrote %s %s", s.rev, k.kind.Kind, k.name))
	return s.rev
}

// remove deletes the object named like o at a new revision, if it exists.
func (s *versionedStore) remove(o client.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := s.keyOf(o)
	if s.at(k, s.rev) == nil {
		return
	}
	s.rev++
	s.history[k] = append(s.history[k], storedVersion{s.rev, nil})
	s.log = append(s.log, fmt.Sprintf("%d: deleted %s %s", s.rev, k.kind.Kind, k.name))
}

// now returns the current revision.
func (s *versionedStore) now() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// at returns the object k names as it was at revision rev, nil where it
// did not exist then. The caller holds the lock.
func (s *versionedStore) at(k storedKey, rev uint64) client.Object {
	var out client.Object
	for _, v := range s.history[k] {
		if v.rev > rev {
			break
		}
		out = v.obj
	}
	return out
}

// current returns a copy of the object named like o as it is now, nil
// where it does not exist.
func (s *versionedStore) current(o client.Object) client.Object {
	s.mu.Lock()
	defer s.mu.Unlock()
	if got := s.at(s.keyOf(o), s.rev); got != nil {
		return got.DeepCopyObject().(client.Object)
	}
	return nil
}

// state returns the resourceVersion, by kind and name, of every object in
// namespace as it was at revision rev, of the kinds given; pods only where
// they carry label.
func (s *versionedStore) state(rev uint64, namespace, label string, kinds ...string) map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]string{}
	for k := range s.history {
		if k.namespace != namespace || !slices.Contains(kinds, k.kind.Kind) {
			continue
		}
		o := s.at(k, rev)
		if o == nil || k.kind.Kind == "Pod" && !labels.Set(o.GetLabels()).Has(label) {
			continue
		}
		out[k.kind.Kind+"/"+k.name] = o.GetResourceVersion()
	}
	return out
}

func (s *versionedStore) Get(_ context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if len(opts) > 0 {
		return fmt.Errorf("the store answers a Get without options, not %v", opts)
	}
	if s.between != nil {
		asked := obj.DeepCopyObject().(client.Object)
		asked.SetNamespace(key.Namespace)
		asked.SetName(key.Name)
		s.between(s, asked)
	}
	s.mu.Lock()
	k := s.keyOf(obj)
	k.namespace, k.name = key.Namespace, key.Name
	got := s.at(k, s.rev)
	s.mu.Unlock()
	if s.after != nil {
		asked := obj.DeepCopyObject().(client.Object)
		asked.SetNamespace(key.Namespace)
		asked.SetName(key.Name)
		defer s.after(s, asked, got)
	}
	if got == nil {
		return apierrors.NewNotFound(schema.GroupResource{Group: k.kind.Group, Resource: strings.ToLower(k.kind.Kind) + "s"}, key.Name)
	}
	reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(got.DeepCopyObject()).Elem())
	return nil
}

func (s *versionedStore) List(_ context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if s.between != nil {
		s.between(s, nil)
	}
	if s.after != nil {
		defer s.after(s, nil, nil)
	}
	var lo client.ListOptions
	lo.ApplyOptions(opts)
	named, byName := "", false
	if lo.FieldSelector != nil {
		named, byName = lo.FieldSelector.RequiresExactMatch("metadata.name")
		if !byName || len(lo.FieldSelector.Requirements()) != 1 {
			return fmt.Errorf("the store answers a list by metadata.name alone of the fields, not %s", lo.FieldSelector)
		}
	}
	if lo.Limit != 0 || lo.Continue != "" {
		return fmt.Errorf("the store answers a list by namespace, labels and name only, not %+v", lo)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	gvk, err := apiutil.GVKForObject(list, s.scheme)
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	rev := s.rev
	if lo.Raw != nil && lo.Raw.ResourceVersion != "" {
		if lo.Raw.ResourceVersionMatch != metav1.ResourceVersionMatchExact {
			return fmt.Errorf("the store answers a list at a revision only with resourceVersionMatch Exact, not %q", lo.Raw.ResourceVersionMatch)
		}
		if rev, err = strconv.ParseUint(lo.Raw.ResourceVersion, 10, 64); err != nil {
			return err
		}
		if rev > s.rev {
			return apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rev, s.rev), 1)
		}
	}
	var names []storedKey
	for k := range s.history {
		if k.kind == gvk && (lo.Namespace == "" || k.namespace == lo.Namespace) && (!byName || k.name == named) {
			names = append(names, k)
		}
	}
	slices.SortFunc(names, func(a, b storedKey) int { return strings.Compare(a.namespace+"/"+a.name, b.namespace+"/"+b.name) })
	var items []runtime.Object
	for _, k := range names {
		o := s.at(k, rev)
		if o == nil || lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(o.GetLabels())) {
			continue
		}
		items = append(items, o.DeepCopyObject())
	}
	if err := meta.SetList(list, items); err != nil {
		return err
	}
	list.SetResourceVersion(strconv.FormatUint(rev, 10))
	return nil
}

// written returns what each revision wrote, one per line.
func (s *versionedStore) written() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.log, "\n")
}
