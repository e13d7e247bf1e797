package sequencer_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// Every Event recorded is written once, as recorded: two Events of the
// same reason about the same object stay two Events with their own notes
// (client-go's recorder would merge the second into the first's series,
// keeping the first note), and a note over the API's limit is cut, not
// refused.
func TestEveryEventRecordedIsWrittenAsRecorded(t *testing.T) {
	h := apiServer.Get(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "events-"}}
	require.NoError(t, h.Client.Create(ctx, ns))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe2", Namespace: ns.Name}}
	require.NoError(t, h.Client.Create(ctx, cm))

	w := sequencer.NewEventWriter(h.Client, scheme.New(), v2alpha1.FieldManager, logr.Discard())
	long := strings.Repeat("waiting for acme-fé1 ", 100)
	w.Eventf(cm, nil, corev1.EventTypeNormal, v2alpha1.ReasonWaitingForPrerequisite, "Wait", "waiting for %s", "acme-be")
	w.Eventf(cm, nil, corev1.EventTypeNormal, v2alpha1.ReasonWaitingForPrerequisite, "Wait", "waiting for %s", "acme-fe1")
	w.Eventf(cm, nil, corev1.EventTypeWarning, v2alpha1.ReasonDependencyCycle, "Wait", "%s", long)
	go func() { _ = w.Start(ctx) }()

	var got eventsv1.EventList
	require.Eventually(t, func() bool {
		require.NoError(t, h.Client.List(ctx, &got, client.InNamespace(ns.Name)))
		return len(got.Items) == 3
	}, 30*time.Second, 50*time.Millisecond, "three Events written")
	notes := map[string]eventsv1.Event{}
	for _, ev := range got.Items {
		notes[ev.Note] = ev
		assert.Equal(t, "acme-fe2", ev.Regarding.Name)
		assert.Equal(t, "ConfigMap", ev.Regarding.Kind)
		assert.Equal(t, v2alpha1.FieldManager, ev.ReportingController)
		assert.Equal(t, "Wait", ev.Action)
		assert.Nil(t, ev.Series, "no series: each Event written as recorded")
	}
	require.Contains(t, notes, "waiting for acme-be")
	require.Contains(t, notes, "waiting for acme-fe1")
	assert.Equal(t, v2alpha1.ReasonWaitingForPrerequisite, notes["waiting for acme-fe1"].Reason)
	assert.Equal(t, corev1.EventTypeNormal, notes["waiting for acme-fe1"].Type)
	cycle := slices.IndexFunc(got.Items, func(ev eventsv1.Event) bool { return ev.Reason == v2alpha1.ReasonDependencyCycle })
	require.GreaterOrEqual(t, cycle, 0, "the Event with the long note is written")
	note := got.Items[cycle].Note
	assert.Equal(t, corev1.EventTypeWarning, got.Items[cycle].Type)
	assert.LessOrEqual(t, len(note), 1024, "within the API's limit")
	assert.True(t, utf8.ValidString(note), "cut on a character boundary")
	assert.True(t, strings.HasSuffix(note, "…"), "the cut is shown")
	assert.True(t, strings.HasPrefix(long, strings.TrimSuffix(note, "…")), "the note's start is kept")
}

// Events still queued when the manager stops are written before the writer
// returns: the writer starts after its context is done, with Events queued.
func TestEventsQueuedAtShutdownAreStillWritten(t *testing.T) {
	h := apiServer.Get(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "events-"}}
	require.NoError(t, h.Client.Create(ctx, ns))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "acme-be", Namespace: ns.Name}}
	require.NoError(t, h.Client.Create(ctx, cm))

	w := sequencer.NewEventWriter(h.Client, scheme.New(), v2alpha1.FieldManager, logr.Discard())
	for i := range 10 {
		w.Eventf(cm, nil, corev1.EventTypeNormal, v2alpha1.ReasonReleased, "Release", "release %d", i)
	}
	stopped, stop := context.WithCancel(ctx)
	stop()
	require.NoError(t, w.Start(stopped))

	var got eventsv1.EventList
	require.NoError(t, h.Client.List(ctx, &got, client.InNamespace(ns.Name)))
	assert.Len(t, got.Items, 10, "every queued Event written before Start returned")
}

// The reconcile never waits for an Event: when the queue is full (the API
// server slower than the state changes) the Event is dropped and counted.
func TestAnEventThatDoesNotFitTheQueueIsDroppedAndCounted(t *testing.T) {
	w := sequencer.NewEventWriter(nil, scheme.New(), v2alpha1.FieldManager, logr.Discard()) // never started
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "acme-fe2", Namespace: "acme"}}
	before := sequencer.EventsDropped()
	for range sequencer.EventQueue {
		w.Eventf(cm, nil, corev1.EventTypeNormal, v2alpha1.ReasonReleased, "Release", "released")
	}
	assert.Equal(t, before, sequencer.EventsDropped(), "a full queue's Events are kept")
	w.Eventf(cm, nil, corev1.EventTypeNormal, v2alpha1.ReasonReleased, "Release", "released")
	assert.Equal(t, before+1, sequencer.EventsDropped(), "the one that does not fit is counted")
}
