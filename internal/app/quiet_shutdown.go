package app

import (
	"context"
	"errors"
	"slices"

	"github.com/go-logr/logr"
)

// readCutOff is the message client-go logs at error level when reading a
// response body fails (k8s.io/client-go/rest, transformResponse).
const readCutOff = "Unexpected error when reading response body"

// QuietCancelledReads returns log with one error made a V(1) line: client-go's
// readCutOff for a read whose context was cancelled. On shutdown (a rolling
// restart, a lost lease) every read then in flight is cut off so, and each
// would otherwise log an error that asks for no action; the read's caller
// still gets the error. A read cut off any other way (a deadline, a broken
// connection) is still an error.
func QuietCancelledReads(log logr.Logger) logr.Logger {
	sink := log.GetSink()
	if sink == nil {
		return log
	}
	if cd, ok := sink.(logr.CallDepthLogSink); ok {
		sink = cd.WithCallDepth(1) // the caller, not this sink, is the line's source
	}
	return log.WithSink(quietSink{sink})
}

// quietSink is QuietCancelledReads' sink: it passes everything to LogSink
// but readCutOff's cancelled reads.
type quietSink struct{ logr.LogSink }

// Info passes the line on: written out (not promoted from the embedded
// sink, a frame the runtime hides), so that the call depth set for this
// sink's frame holds for Info as for Error.
func (s quietSink) Info(level int, msg string, keysAndValues ...any) {
	s.LogSink.Info(level, msg, keysAndValues...)
}

func (s quietSink) Error(err error, msg string, keysAndValues ...any) {
	if msg == readCutOff && errors.Is(err, context.Canceled) {
		if s.Enabled(1) {
			s.LogSink.Info(1, msg+" (its request was cancelled)", slices.Concat(keysAndValues, []any{"error", err.Error()})...)
		}
		return
	}
	s.LogSink.Error(err, msg, keysAndValues...)
}

func (s quietSink) WithValues(keysAndValues ...any) logr.LogSink {
	return quietSink{s.LogSink.WithValues(keysAndValues...)}
}

func (s quietSink) WithName(name string) logr.LogSink {
	return quietSink{s.LogSink.WithName(name)}
}

func (s quietSink) WithCallDepth(depth int) logr.LogSink {
	if cd, ok := s.LogSink.(logr.CallDepthLogSink); ok {
		return quietSink{cd.WithCallDepth(depth)}
	}
	return s
}
