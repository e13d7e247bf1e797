// Command express-sequencer serves the Express admission webhooks — it
// injects the operator's default rollout order into every Backend and
// Frontend, gates a node whenever its rollout target changes, and denies
// specs that could never make progress — and runs the sequencer, which
// releases each gated node once its prerequisites are Ready on target.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	crzap "sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/medallia/express-sequencer/internal/app"
)

// version is set at build time: go build -ldflags "-X main.version=v0.2.0".
var version = "dev"

// versionString is the version, the commit it was built from when known,
// and the Go version; "+cachefloor" marks a build whose fresh reads read
// the cache (a benchmark's floor, never a release).
func versionString() string {
	commit := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				commit = " commit " + s.Value[:12]
			}
		}
	}
	floor := ""
	if app.CacheFloor {
		floor = "+cachefloor"
	}
	return fmt.Sprintf("express-sequencer %s%s%s (%s %s/%s)", version, floor, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "express-sequencer:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	o := app.DefaultOptions()
	c, err := app.ParseFlags(args, &o, func(fs *flag.FlagSet) {
		fmt.Fprint(fs.Output(), `Usage: express-sequencer [flags]

Serves the admission webhooks for Express Backend and Frontend nodes
(express.medallia.com/v2alpha1): injects the operator's default provisioning
and upgrade prerequisites, gates a node whenever its rollout target changes,
and denies specs that could never make progress. Runs the sequencer, which
releases each gated node once its live prerequisites are Ready on their
target, and explains every wait in the node's PrerequisitesReady condition
and an Event.

Uses the kubeconfig from --kubeconfig, $KUBECONFIG, ~/.kube/config or the
in-cluster service account, in that order.

Flags:
`)
		fs.PrintDefaults()
	})
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return err
	}
	if c.Version {
		fmt.Println(versionString())
		return nil
	}
	o.Log = app.QuietCancelledReads(crzap.New(crzap.UseFlagOptions(&c.Zap)))
	ctrl.SetLogger(o.Log)
	// client-go's own lines too (reads made on a context without a logger:
	// the auditor's, the certificate rotator's), in the same format and
	// through the same filter.
	klog.SetLogger(o.Log)
	memoryLimit := setMemoryLimit(o.Log, memlimit.FromCgroup)

	if c.Kubeconfig != "" {
		os.Setenv("KUBECONFIG", c.Kubeconfig)
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(c.QPS), c.Burst
	ctx := ctrl.SetupSignalHandler()
	mgr, err := app.New(ctx, cfg, o)
	if err != nil {
		return err
	}
	o.Log.Info("Starting express-sequencer", "version", versionString(), "webhookPort", o.WebhookPort, "certMode", o.CertMode, "certDir", o.CertDir, "goMemoryLimit", memoryLimit)
	return mgr.Start(ctx)
}

// setMemoryLimit sets the Go runtime's soft memory limit to 90 % of the
// container's (what limit reports: its cgroup's), unless GOMEMLIMIT is set
// or AUTOMEMLIMIT is "off" (AUTOMEMLIMIT=0.8 sets another share). Near the
// limit the garbage collector then runs harder instead of the container
// being killed for memory: the garbage of the fresh reads and admission
// requests between two collections is most of the process's peak
// (docs/performance.md, "Memory"). It returns the limit as logged: "none"
// when there is none.
func setMemoryLimit(log logr.Logger, limit memlimit.Provider) string {
	set, err := memlimit.Set(memlimit.WithProvider(limit), memlimit.WithLogger(slog.New(logr.ToSlogHandler(log.V(1)))))
	switch {
	case errors.Is(err, memlimit.ErrNoCgroup), errors.Is(err, memlimit.ErrCgroupsNotSupported):
		// Not in a container (a local run, another OS): no limit to follow.
	case err != nil:
		log.Error(err, "Leaving the Go memory limit as it is")
	}
	if set == math.MaxInt64 {
		return "none"
	}
	return fmt.Sprintf("%d MiB", set>>20)
}
