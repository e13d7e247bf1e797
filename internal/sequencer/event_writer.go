package sequencer

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	eventutil "k8s.io/client-go/tools/record/util"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

const (
	// eventQueue is how many Events may wait to be written (client-go's
	// recorder queues 1,000).
	eventQueue = 1000
	// eventWorkers write Events at the same time: enough to keep up with
	// the releases of a fleet-wide upgrade while every write waits its turn
	// at a saturated API server (about 100 Events/s at 150 ms a write).
	eventWorkers = 16
	// eventWriteTries is how often an Event is tried, 1 s apart and then
	// twice as long each time, before it is given up.
	eventWriteTries = 6
	// eventNoteLimit is the API's limit on an Event's note, in bytes.
	eventNoteLimit = 1024
	// eventDrain is how long, at most, Events still queued at shutdown, or
	// recorded by reconciles finishing then, are still written; eventQuiet
	// ends that sooner, once no Event has come for that long.
	eventDrain = 5 * time.Second
	eventQuiet = 100 * time.Millisecond
)

// EventWriter is the sequencer's events.EventRecorder: every Event recorded
// is created once, as recorded (events.k8s.io/v1), by a few workers
// draining a bounded queue; when the queue is full the Event is dropped and
// counted (express_sequencer_events_dropped_total), the reconcile never
// waits for it.
//
// client-go's recorder merges Events of the same reason about the same
// object version into a series and keeps every Event it wrote for 6 to 12
// minutes to do so: memory that grows with the fleet's rollouts (32 MB at
// 8,000 nodes rolled at once), spent on storms the sequencer does not make
// — it records one Event per state change of a node. This writer keeps
// nothing once an Event is written.
type EventWriter struct {
	client     client.Client
	scheme     *runtime.Scheme
	controller string
	instance   string
	queue      chan *eventsv1.Event
	workers    int
	backoff    utilwait.Backoff
	now        func() time.Time
	log        logr.Logger
}

var _ events.EventRecorder = (*EventWriter)(nil)

// NewEventWriter returns a writer of Events reported by controller (their
// reportingController), logging to log. It writes nothing until Start runs
// (add it to the manager).
func NewEventWriter(c client.Client, scheme *runtime.Scheme, controller string, log logr.Logger) *EventWriter {
	host, _ := os.Hostname()
	return &EventWriter{
		client: c, scheme: scheme, controller: controller, instance: controller + "-" + host,
		queue: make(chan *eventsv1.Event, eventQueue), workers: eventWorkers,
		backoff: utilwait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.25, Steps: eventWriteTries},
		now:     time.Now, log: log.WithName("events"),
	}
}

// Eventf queues an Event about regarding (and related, when not nil).
func (w *EventWriter) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	ev, err := w.event(regarding, related, eventtype, reason, action, fmt.Sprintf(note, args...))
	if err != nil {
		w.log.Error(err, "Not recording an Event", "reason", reason)
		return
	}
	select {
	case w.queue <- ev:
	default:
		eventsDropped.Inc()
		w.log.V(1).Info("Event queue full; dropping an Event", "regarding", ev.Regarding.Name, "reason", reason, "note", ev.Note)
	}
}

// Start writes queued Events until ctx is done. It stops with the
// controllers (it runs on the leader only, as they do), so Events recorded
// by reconciles finishing then are still written: after ctx is done it goes
// on until no Event has come for eventQuiet, for eventDrain at most, and
// counts what is left as dropped.
func (w *EventWriter) Start(ctx context.Context) error {
	writes, stopWrites := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWrites()
	deadline := context.AfterFunc(ctx, func() { time.AfterFunc(eventDrain, stopWrites) })
	defer deadline()
	var wg sync.WaitGroup
	for range w.workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				select {
				case ev := <-w.queue:
					w.write(writes, ev)
				case <-ctx.Done():
				}
			}
			for {
				select {
				case ev := <-w.queue:
					if writes.Err() != nil { // past eventDrain
						eventsDropped.Inc()
						continue
					}
					w.write(writes, ev)
				case <-time.After(eventQuiet):
					return
				case <-writes.Done():
					return
				}
			}
		})
	}
	wg.Wait()
	for {
		select {
		case <-w.queue:
			eventsDropped.Inc()
		default:
			return nil
		}
	}
}

// NeedLeaderElection is true: only the leader's reconciles record Events,
// and the manager stops its leader-elected runnables together, after the
// others.
func (w *EventWriter) NeedLeaderElection() bool { return true }

// write creates ev, retrying with backoff while the API server answers
// with an error a retry can mend.
func (w *EventWriter) write(ctx context.Context, ev *eventsv1.Event) {
	err := utilwait.ExponentialBackoffWithContext(ctx, w.backoff, func(ctx context.Context) (bool, error) {
		apiWrites.WithLabelValues("create", "events").Inc()
		err := w.client.Create(ctx, ev.DeepCopy())
		switch {
		case err == nil || apierrors.IsAlreadyExists(err):
			return true, nil
		case apierrors.IsInvalid(err), apierrors.IsForbidden(err), apierrors.IsNotFound(err), apierrors.IsBadRequest(err):
			return false, err // the same Event would be refused again
		default:
			w.log.V(1).Info("Retrying an Event", "regarding", ev.Regarding.Name, "reason", ev.Reason, "error", err.Error())
			return false, nil
		}
	})
	if err != nil {
		eventsFailed.Inc()
		w.log.Error(err, "Event not written", "regarding", ev.Regarding.Name, "reason", ev.Reason, "note", ev.Note)
	}
}

// event builds the Event as client-go's recorder does (name — a UUID when
// the object's name is too long to carry a timestamp —, times, reporting
// controller and instance), its note cut to the API's limit.
func (w *EventWriter) event(regarding, related runtime.Object, eventtype, reason, action, note string) (*eventsv1.Event, error) {
	if eventtype != corev1.EventTypeNormal && eventtype != corev1.EventTypeWarning {
		return nil, fmt.Errorf("event type %q is neither Normal nor Warning", eventtype)
	}
	ref, err := reference.GetReference(w.scheme, regarding)
	if err != nil {
		return nil, fmt.Errorf("referring to the object the Event is about: %w", err)
	}
	var rel *corev1.ObjectReference
	if related != nil {
		if rel, err = reference.GetReference(w.scheme, related); err != nil {
			return nil, fmt.Errorf("referring to the Event's related object: %w", err)
		}
	}
	now := w.now()
	ns := ref.Namespace
	if ns == "" {
		ns = metav1.NamespaceDefault
	}
	return &eventsv1.Event{
		ObjectMeta:          metav1.ObjectMeta{Name: eventutil.GenerateEventName(ref.Name, now.UnixNano()), Namespace: ns},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: w.controller,
		ReportingInstance:   w.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             rel,
		Note:                truncateNote(note),
		Type:                eventtype,
	}, nil
}

// truncateNote cuts note to the API's limit on an Event's note (1,024
// bytes), on a character boundary, ending it with an ellipsis when cut.
func truncateNote(note string) string {
	if len(note) <= eventNoteLimit {
		return note
	}
	const ellipsis = "…"
	cut := eventNoteLimit - len(ellipsis)
	for cut > 0 && !utf8.RuneStart(note[cut]) {
		cut--
	}
	return note[:cut] + ellipsis
}
