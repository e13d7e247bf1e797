package controlplane

import (
	"errors"
	"os"

	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/medallia/express-sequencer/cmd/express-sequencer/app"
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
