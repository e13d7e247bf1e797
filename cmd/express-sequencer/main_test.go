package main

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/medallia/express-sequencer/internal/app"
)

func TestHelpExitsCleanly(t *testing.T) {
	assert.NoError(t, run([]string{"--help"}))
}

func TestBadInvocationsSayWhatIsWrong(t *testing.T) {
	cases := map[string][]string{
		"flag provided but not defined: -bogus":   {"--bogus"},
		`unexpected arguments ["serve"]`:          {"serve"},
		`--log-level: unrecognized level: "loud"`: {"--log-level", "loud"},
	}
	for want, args := range cases {
		err := run(args)
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), want)
	}
}

func TestTheDefaultsRunBothHalves(t *testing.T) {
	o := app.DefaultOptions()
	assert.True(t, o.Webhooks, "webhooks on by default")
	assert.True(t, o.Sequencer, "sequencer on by default")
	assert.Positive(t, o.MaxConcurrent)
	assert.Positive(t, o.Grouping.SettleTime)
	assert.Positive(t, o.Grouping.LandingTimeout)
	assert.Greater(t, o.Grouping.SettleCap, o.Grouping.SettleTime, "the cap bounds a hold longer than one settle time")
	assert.Positive(t, o.ProgressDeadline)
	assert.Greater(t, o.LeaseDuration, o.RenewDeadline, "client-go requires lease > renew deadline")
	assert.Greater(t, o.CAValidity, o.CertValidity)
}

func TestVersionIsPrintedAndSetAtBuildTime(t *testing.T) {
	assert.NoError(t, run([]string{"--version"}))
	v := versionString()
	assert.Contains(t, v, "express-sequencer dev", "the default when -ldflags sets no version")
	assert.Contains(t, v, runtime.Version())
}

func TestTheZapFlagsAndTheirAliasesAreAccepted(t *testing.T) {
	for _, args := range [][]string{{"--zap-log-level", "debug"}, {"--zap-encoder", "console"}, {"--log-level", "warn"}, {"--log-development"}} {
		err := run(append(args, "--kubeconfig", "/nonexistent/kubeconfig"))
		require.Error(t, err, args)
		assert.Contains(t, err.Error(), "kubeconfig", "%v is parsed; the run stops at the kubeconfig", args)
	}
	err := run([]string{"--zap-log-level", "chatty"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "zap-log-level")
}

// The Go memory limit is 90 % of the container's, "none" without one, and
// GOMEMLIMIT, when set, wins.
func TestTheGoMemoryLimitFollowsTheContainers(t *testing.T) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		t.Skip("GOMEMLIMIT is set for this test run")
	}
	before := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(before) })

	gib := uint64(1 << 30)
	assert.Equal(t, "921 MiB", setMemoryLimit(logr.Discard(), memlimit.Limit(gib)))
	assert.Equal(t, int64(float64(gib)*0.9), debug.SetMemoryLimit(-1))

	assert.Equal(t, "none", setMemoryLimit(logr.Discard(), func() (uint64, error) { return 0, memlimit.ErrNoLimit }))
	assert.Equal(t, int64(math.MaxInt64), debug.SetMemoryLimit(-1))

	debug.SetMemoryLimit(math.MaxInt64)
	assert.Equal(t, "none", setMemoryLimit(logr.Discard(), func() (uint64, error) { return 0, memlimit.ErrCgroupsNotSupported }),
		"outside a container the limit stays Go's default")

	t.Setenv("GOMEMLIMIT", "100MiB")
	debug.SetMemoryLimit(100 << 20)
	assert.Equal(t, "100 MiB", setMemoryLimit(logr.Discard(), memlimit.Limit(1<<30)), "GOMEMLIMIT wins")
}
