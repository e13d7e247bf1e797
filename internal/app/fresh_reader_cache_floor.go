//go:build cachefloor

package app

import (
	"github.com/go-logr/logr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// CacheFloor reports that this binary was built with -tags cachefloor.
const CacheFloor = true

// freshReader, in a binary built with -tags cachefloor, reads from the
// cache: no decision rests on a fresh read, and releases may go out of
// order wherever the cache lags. It exists to measure what everything
// but the fresh reads costs (go run ./bench -cache-floor); no release is
// built so, and the binary's version says so.
func freshReader(mgr manager.Manager, log logr.Logger) (client.Reader, error) {
	log.Info("Built with -tags cachefloor: every fresh read is the cache's, for measurement only; releases may go out of order")
	return mgr.GetClient(), nil
}
