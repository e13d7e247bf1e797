package sequencer

import (
	"time"

	"k8s.io/utils/clock"
)

// stopwatch times the steps of one reconcile, for
// express_sequencer_release_step_seconds: observed only for a reconcile
// that releases a node or pods, so the steps add up to where a release's
// time goes. It measures, it never decides anything.
type stopwatch struct {
	// queued is how long the change waited for the reconcile, -1 when the
	// reconcile was no change's (a requeue).
	queued time.Duration
	last   time.Time
	laps   []lap
}

// lap is one timed step.
type lap struct {
	step string
	took time.Duration
}

// newStopwatch starts timing a reconcile of the change seen at since
// (zero for a requeue), by c.
func newStopwatch(c clock.PassiveClock, since time.Time) *stopwatch {
	w := &stopwatch{queued: -1, last: time.Now()}
	if !since.IsZero() {
		w.queued = c.Since(since)
	}
	return w
}

// lap ends step: the time since the last lap (or the start).
func (w *stopwatch) lap(step string) {
	now := time.Now()
	w.laps = append(w.laps, lap{step, now.Sub(w.last)})
	w.last = now
}

// observe records the queue wait and every lap.
func (w *stopwatch) observe() {
	if w.queued >= 0 {
		releaseSteps.WithLabelValues("queue").Observe(w.queued.Seconds())
	}
	for _, l := range w.laps {
		releaseSteps.WithLabelValues(l.step).Observe(l.took.Seconds())
	}
}
