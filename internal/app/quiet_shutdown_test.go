package app_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"

	"github.com/medallia/express-sequencer/internal/app"
)

// lines records what a funcr logger writes, at verbosity v.
type lines struct {
	mu  sync.Mutex
	got []string
}

func (l *lines) logger(v int) logr.Logger {
	return funcr.NewJSON(func(args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.got = append(l.got, args)
	}, funcr.Options{Verbosity: v})
}

func (l *lines) all() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.got, "\n")
}

// readCutOffBy starts a response body that never ends, cancels the read
// that client-go makes of it once the response's headers are in, and
// returns the read's error: client-go logs it, through the logger in the
// read's context, as it does on shutdown.
func readCutOffBy(t *testing.T, log logr.Logger) error {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(`{"kind":`))
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), log))
	defer cancel()
	c, err := rest.RESTClientFor(&rest.Config{Host: srv.URL, ContentConfig: rest.ContentConfig{
		GroupVersion: &schemeGroupVersion, NegotiatedSerializer: scheme.Codecs.WithoutConversion(),
	}, WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
		return cancelAfterHeaders{rt, cancel}
	}})
	require.NoError(t, err)
	return c.Get().AbsPath("/api/v1/namespaces/x/pods/y").Do(ctx).Error()
}

// cancelAfterHeaders cancels the request's context once its response's
// headers are in: the body's read is what is cut off.
type cancelAfterHeaders struct {
	http.RoundTripper
	cancel context.CancelFunc
}

func (c cancelAfterHeaders) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.RoundTripper.RoundTrip(r)
	c.cancel()
	return resp, err
}

var schemeGroupVersion = scheme.Scheme.PrioritizedVersionsForGroup("")[0]

func TestAReadCutOffByItsCancelledContextIsNotLoggedAsAnError(t *testing.T) {
	for _, tc := range []struct {
		name      string
		verbosity int
		want      []string
		wantNot   []string
	}{
		{name: "at the default verbosity nothing is logged", verbosity: 0, wantNot: []string{"Unexpected error"}},
		{name: "at verbosity 1 it is an info line saying the request was cancelled", verbosity: 1,
			want: []string{`"level":1`, "Unexpected error when reading response body (its request was cancelled)", "context canceled"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got lines
			err := readCutOffBy(t, app.QuietCancelledReads(got.logger(tc.verbosity)))
			require.ErrorIs(t, err, context.Canceled)
			for _, w := range tc.want {
				assert.Contains(t, got.all(), w)
			}
			for _, w := range tc.wantNot {
				assert.NotContains(t, got.all(), w)
			}
		})
	}
}

func TestWithoutTheFilterClientGoLogsTheCancelledReadAsAnError(t *testing.T) {
	var got lines
	err := readCutOffBy(t, got.logger(0))
	require.ErrorIs(t, err, context.Canceled)
	assert.Contains(t, got.all(), `"msg":"Unexpected error when reading response body"`, "client-go no longer logs the message the filter matches")
	assert.Contains(t, got.all(), `"error":"context canceled"`)
}

func TestOtherErrorsStillLogAsErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		msg  string
	}{
		{name: "a read cut off by its deadline", err: context.DeadlineExceeded, msg: "Unexpected error when reading response body"},
		{name: "another message with a cancelled context", err: context.Canceled, msg: "Reconciler error"},
		{name: "any other error", err: errors.New("boom"), msg: "Unexpected error when reading response body"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got lines
			app.QuietCancelledReads(got.logger(0)).WithName("sequencer").WithValues("tenant", "acme").Error(tc.err, tc.msg)
			assert.Contains(t, got.all(), `"msg":"`+tc.msg+`"`)
			assert.Contains(t, got.all(), `"error":"`+tc.err.Error()+`"`)
			assert.Contains(t, got.all(), `"tenant":"acme"`)
		})
	}
}

func TestLinesThroughTheFilterNameTheirCaller(t *testing.T) {
	var got lines
	log := app.QuietCancelledReads(funcr.NewJSON(func(args string) {
		got.mu.Lock()
		defer got.mu.Unlock()
		got.got = append(got.got, args)
	}, funcr.Options{LogCaller: funcr.All}))
	log.Info("an info line")
	log.Error(errors.New("boom"), "an error line")
	log.WithName("sequencer").WithValues("tenant", "acme").Info("a derived logger's line")
	require.Len(t, got.got, 3)
	for _, line := range got.got {
		assert.Contains(t, line, `"file":"quiet_shutdown_test.go"`, line)
	}
}
