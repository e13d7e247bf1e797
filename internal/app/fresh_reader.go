//go:build !cachefloor

package app

import (
	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/medallia/express-sequencer/internal/sequencer"
)

// CacheFloor reports that this binary was built with -tags cachefloor.
const CacheFloor = false

// freshReader is what the pod webhook, the release guard and the
// sequencer's releases read the tenant with: straight from the API server.
func freshReader(mgr manager.Manager, _ logr.Logger) (client.Reader, error) {
	return sequencer.FreshReader(mgr.GetConfig(), mgr.GetAPIReader())
}
