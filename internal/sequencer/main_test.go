package sequencer_test

import (
	"os"
	"testing"

	"github.com/medallia/express-sequencer/internal/app"
	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// apiServer is a real kube-apiserver with express-sequencer's webhooks (no
// sequencer), started by the first test that needs it.
var apiServer = controlplane.Lazy{Edits: []func(*app.Options){controlplane.WebhooksOnly}}

func TestMain(m *testing.M) {
	code := m.Run()
	apiServer.Stop()
	os.Exit(code)
}
