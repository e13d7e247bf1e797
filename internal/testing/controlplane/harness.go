package controlplane

import (
	"errors"
	"os"
	"sync"
	"testing"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/medallia/express-sequencer/internal/app"
)

// Harness is a control plane with express-sequencer's manager serving the
// webhooks over TLS from self-signed certificates it injected itself: what a
// test binary that crosses the API needs.
type Harness struct {
	*ControlPlane
	// Manager is the running express-sequencer manager; its client reads
	// from the cache the webhooks read from.
	Manager manager.Manager
	// CertDir holds the serving certificates.
	CertDir string
	stop    func()
}

// NewHarness starts a control plane and express-sequencer on it; edits, if
// any, change express-sequencer's options first.
func NewHarness(log logr.Logger, edits ...func(*app.Options)) (*Harness, error) {
	cp, err := Start()
	if err != nil {
		return nil, err
	}
	h := &Harness{ControlPlane: cp}
	if h.CertDir, err = os.MkdirTemp("", "express-sequencer-certs-"); err != nil {
		return nil, errors.Join(err, cp.Stop())
	}
	o := cp.ManagerOptions(h.CertDir, log)
	for _, edit := range edits {
		edit(&o)
	}
	if h.Manager, h.stop, err = cp.StartManager(o); err != nil {
		return nil, errors.Join(err, cp.Stop(), os.RemoveAll(h.CertDir))
	}
	return h, nil
}

// Stop stops express-sequencer and the control plane, and removes the certs.
func (h *Harness) Stop() error {
	h.stop()
	return errors.Join(h.ControlPlane.Stop(), os.RemoveAll(h.CertDir))
}

// Lazy is a Harness a test binary starts on first use (so tests that need
// none, such as fuzz targets, do not pay for it) and stops from TestMain.
type Lazy struct {
	// Setup, if set, runs once after the harness starts (creating fixtures).
	Setup func(*Harness) error
	// Edits change express-sequencer's options, as for NewHarness.
	Edits []func(*app.Options)

	once    sync.Once
	err     error
	harness *Harness
}

// Get starts the harness on first use and fails the test if it cannot.
func (l *Lazy) Get(t testing.TB) *Harness {
	t.Helper()
	l.once.Do(func() {
		if l.harness, l.err = NewHarness(logr.Discard(), l.Edits...); l.err == nil && l.Setup != nil {
			l.err = l.Setup(l.harness)
		}
	})
	require.NoError(t, l.err)
	return l.harness
}

// Stop stops the harness if it was started.
func (l *Lazy) Stop() {
	if l.harness != nil {
		_ = l.harness.Stop()
	}
}

// WebhooksOnly runs express-sequencer without its sequencer: gates the
// webhooks add stay for tests to see.
func WebhooksOnly(o *app.Options) { o.Sequencer = false }

// HandReleases lets tests release nodes and pods by hand, as the sequencer
// identity, in states the sequencer would not release them in (a node
// released with no pod of its backend anywhere): the fixtures of suites
// that check admission rules rather than the order. Every suite that runs
// the sequencer keeps the release guard on.
func HandReleases(o *app.Options) { o.RecheckReleases = false }
