package sequencer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/medallia/express-sequencer/internal/scheme"
	"github.com/medallia/express-sequencer/internal/sequencer"
)

// A sequencer given no reader that bypasses the cache is refused at setup:
// it would otherwise release on the cache alone (DESIGN §4b).
func TestASequencerWithoutAFreshReaderIsRefusedAtSetup(t *testing.T) {
	mgr, err := ctrl.NewManager(&rest.Config{Host: "https://127.0.0.1:1"}, ctrl.Options{Scheme: scheme.New(), Metrics: metricsserver.Options{BindAddress: "0"}})
	require.NoError(t, err)
	err = (&sequencer.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, 1)
	assert.ErrorContains(t, err, "bypasses the cache")
}
