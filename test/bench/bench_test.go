package main

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A small run of the benchmark: it must finish, find every tenant in order
// and report a latency for every release.
func TestTheBenchmarkRunsAndChecksTheOrder(t *testing.T) {
	var out bytes.Buffer
	res, err := measure(options{tenants: 3, nodes: 4, workers: 2, settle: 200 * time.Millisecond, timeout: 3 * time.Minute, admission: 2, recheckReleases: true}, &out)
	require.NoError(t, err, out.String())
	assert.Empty(t, res.OutOfOrder)
	assert.Zero(t, res.Violations, "the order auditor, run beside the sequencer, counts no violation where the order held")
	assert.Len(t, res.Latencies, 3*3, "one latency per dependent release: fe2, be, fe3 in each tenant")
	assert.Positive(t, res.APICalls)
	assert.Positive(t, res.UpgradeWrites["patch frontends"], "gate patches are counted: %v", res.UpgradeWrites)
	assert.Positive(t, res.UpgradeWrites["create events"], "%v", res.UpgradeWrites)
	assert.Positive(t, res.PeakRSSKiB)
	assert.Positive(t, res.StackCPU["kube-apiserver"], "kube-apiserver's CPU time is read: %v", res.StackCPU)
	assert.Positive(t, res.StackCPU["etcd"], "so is etcd's, apart from it: %v", res.StackCPU)
	assert.Positive(t, res.StackCPU["express-sequencer"], "and the sequencer's, over the same window: %v", res.StackCPU)
	assert.LessOrEqual(t, res.StackCPU["express-sequencer"], res.CPU, "within its CPU time over the whole run: %v", res.StackCPU)
	assert.Positive(t, res.Steps["release"], "a releasing reconcile's steps are timed: %v", res.Steps)
	assert.Positive(t, res.Steps["release-guard/fresh_read"], "the release guard's read is timed: %v", res.Steps)
	assert.Positive(t, res.CacheWaits["frontends.express.medallia.com"].Reads, "kube-apiserver's watch cache's waits are read: %v", res.CacheWaits)
	assert.Positive(t, res.Requests["release-guard list frontends"], "the release guard's LISTs are counted as its own: %v", res.Requests)
	assert.Positive(t, res.Requests["pods list pods"], "so are the pod webhook's: %v", res.Requests)
	assert.Positive(t, res.Requests["sequencer list frontends"], "and the sequencer's reads of the whole tenant: %v", res.Requests)
	assert.Positive(t, res.Requests["sequencer apply frontends/status"], "and its condition writes: %v", res.Requests)
	counted := 0
	for _, n := range res.Requests {
		counted += n
	}
	assert.LessOrEqual(t, counted, res.APICalls, "the requests of provisioning and upgrade are among client-go's count of the whole run's")
	var report bytes.Buffer
	reportRequests(&report, res.Requests, 2*3*4)
	assert.Regexp(t, `sequencer API calls over provisioning and upgrade: \d+, [\d.]+ per node rollout, by caller:\n( +\S+ +\d+ +[\d.]+ per node rollout:( \S+ \S+ [\d.]+;)+\n)+$`, report.String())
	assert.LessOrEqual(t, res.Percentile(50), res.Percentile(99))
	assert.Contains(t, out.String(), "pod create, through the pod webhook:", "the admission measurements run too")
	assert.Contains(t, out.String(), "last apply → first release, rollout-id:")
	assert.Contains(t, out.String(), "Frontend create (dry run)", "the webhook cost with and without them is measured")
}

// -cache-floor builds a binary whose fresh reads are the cache's: neither
// the webhooks nor the sequencer send a read to the API server, and the
// run reports the rest of what a rollout costs.
func TestTheBenchmarksCacheFloorSendsNoFreshRead(t *testing.T) {
	var out bytes.Buffer
	res, err := measure(options{tenants: 2, nodes: 4, workers: 2, settle: 200 * time.Millisecond, timeout: 3 * time.Minute, rolloutID: true, recheckReleases: true, scopedReads: true, concurrency: 4, statefulSets: true, noAudit: true, cacheFloor: true}, &out)
	require.NoError(t, err, out.String())
	assert.Empty(t, res.OutOfOrder)
	assert.Len(t, res.Latencies, 2*3)
	assert.Positive(t, res.Requests["sequencer patch frontends"], "the releases are written: %v", res.Requests)
	assert.Positive(t, res.Steps["release-guard/fresh_read"], "the release guard judged the releases, on its cache: %v", res.Steps)
	assert.Positive(t, res.Steps["pods/fresh_read"], "the pod webhook judged the new pods, on its cache: %v", res.Steps)
	assert.Positive(t, res.Steps["scoped_read"], "the sequencer planned releases on its scoped read, of its cache: %v", res.Steps)
	for k := range res.Requests {
		caller, verb, _ := strings.Cut(k, " ")
		assert.NotContains(t, []string{"release-guard", "pods"}, caller, "the webhooks read nothing from the API server: %s", k)
		if caller == "sequencer" {
			assert.NotContains(t, []string{"get", "list"}, strings.Fields(verb)[0], "nor does the sequencer: %s", k)
		}
		assert.NotContains(t, []string{"other get namespaces", "other get backends", "other get frontends"}, k, "nor the node webhooks (a node's mode, a name taken)")
	}
}

// -fleet-view-only provisions the tenants and times the fleet view on them:
// every tenant listed and done.
func TestTheBenchmarkTimesTheFleetViewAlone(t *testing.T) {
	var out bytes.Buffer
	err := runFleetView(options{tenants: 3, nodes: 3, workers: 2, settle: 200 * time.Millisecond, timeout: 3 * time.Minute, rolloutID: true, recheckReleases: true, concurrency: 4, statefulSets: true}, &out)
	require.NoError(t, err, out.String())
	assert.Regexp(t, `fleet view \(kubectl express status -A\), medians of 5 rounds: 3 tenants, 3 done, in \d`, out.String())
	assert.Regexp(t, `decoded whole \d.*decodes nothing \d`, out.String())
}

// A config-only change (configChangeset) is rolled in the same order, and
// the condition writes are broken down by reason; all pods of both tenants
// deleted at once recover in the provisioning order. kube-apiserver runs
// without its watch cache (-no-watch-cache), every read served by etcd.
func TestTheBenchmarkRollsAConfigOnlyChangeInOrder(t *testing.T) {
	var out bytes.Buffer
	res, err := measure(options{tenants: 2, nodes: 4, workers: 2, timeout: 3 * time.Minute, change: "config", rolloutID: true, crash: 2, noWatchCache: true}, &out)
	require.NoError(t, err, out.String())
	assert.Nil(t, res.CacheWaits, "kube-apiserver runs without a watch cache: no read waits for one")
	assert.Empty(t, res.OutOfOrder)
	assert.Len(t, res.Latencies, 2*3)
	assert.Positive(t, res.UpgradeWrites[conditionPrefix+"Released"], "%v", res.UpgradeWrites)
	assert.Empty(t, res.Crash.OutOfOrder)
	assert.Len(t, res.Crash.Latencies, 2*3, "one latency per pod release after the backend: fe1, fe2, fe3 in each tenant")
	assert.Positive(t, res.Crash.Steps["pods/fresh_read"], "a recreated pod's admission is timed: %v", res.Crash.Steps)
}

// The same small run on Kubernetes' own control loops (-cluster): the
// StatefulSet controller creates the pods, the scheduler binds them, KWOK
// makes them Ready; every release is measured and every tenant is in
// order, the upgrade and the recovery of every pod deleted at once.
func TestTheBenchmarkRunsOnKubernetesOwnControlLoops(t *testing.T) {
	var out bytes.Buffer
	res, err := measure(options{tenants: 2, nodes: 4, workers: 2, settle: 200 * time.Millisecond, timeout: 3 * time.Minute, cluster: true, crash: 2, recheckReleases: true, scopedReads: true, podReadsByName: true}, &out)
	require.NoError(t, err, out.String())
	assert.Empty(t, res.OutOfOrder)
	assert.Len(t, res.Latencies, 2*3, "one latency per dependent release: fe2, be, fe3 in each tenant")
	assert.Contains(t, out.String(), "Starting kube-controller-manager (its default client rate limit), kube-scheduler and KWOK")
	assert.Positive(t, res.UpgradeWrites[readsPrefix+"decision"], "with -scoped-reads, releases planned on the workload read by name: %v", res.UpgradeWrites)
	assert.Positive(t, res.Steps["scoped_read"], "the scoped read is timed: %v", res.Steps)
	assert.Positive(t, res.Requests["sequencer get statefulsets"], "the scoped read's GETs are counted as the sequencer's: %v", res.Requests)
	assert.Empty(t, res.Crash.OutOfOrder)
	assert.Len(t, res.Crash.Latencies, 2*3, "one latency per pod release after the backend: fe1, fe2, fe3 in each tenant")
	assert.NotEmpty(t, res.Crash.PodReads, "with -pod-reads-by-name, the recreated pods' admissions are counted by the read they were answered on")
}

// A short soak: changes keep coming for 40 s, sampled every 8 s; every
// change is checked for order, the settled fleet is watched for writes,
// and the plot is written.
func TestTheSoakSamplesTheSequencerAndChecksEveryChange(t *testing.T) {
	var out bytes.Buffer
	plot := t.TempDir() + "/soak.png"
	err := runSoak(options{tenants: 4, nodes: 4, workers: 2, settle: 200 * time.Millisecond, timeout: 3 * time.Minute, rate: 2, rolloutID: true, recheckReleases: true, scopedReads: true, podReadsByName: true, concurrency: 4, statefulSets: true},
		soakOptions{duration: 40 * time.Second, every: 8 * time.Second, quiet: 5 * time.Second, plot: plot}, &out)
	require.NoError(t, err, out.String())
	assert.Regexp(t, `every one of the \d+ changes rolled in order`, out.String())
	assert.Contains(t, out.String(), "no write in the 5s of quiet after the soak")
	assert.Regexp(t, `the order auditor counted 0 violations over the \d+ changes`, out.String())
	assert.Regexp(t, `(?m)^ +\d+\.\d +\d+\.\d +\d+ +\d+ +\d+`, out.String(), "a table of samples")
	info, err := os.Stat(plot)
	require.NoError(t, err)
	assert.Positive(t, info.Size())
}

// The soak's growth check refuses a steady leak — RSS and goroutines rising
// a little every minute, even under noise — and passes noise around a
// level, even a short soak's few samples whose noise slopes upward.
func TestTheSoakRefusesSteadyGrowthAndPassesNoise(t *testing.T) {
	series := func(rss, goroutines func(i int) float64) []soakSample {
		var out []soakSample
		for i := range 31 {
			out = append(out, soakSample{At: time.Duration(i) * time.Minute, RSSMiB: rss(i), Goroutines: int(goroutines(i)), Watches: 43})
		}
		return out
	}
	noise := []float64{0, 9, -7, 4, -12, 6, 11, -3, -9, 2}
	err := flat(series(func(i int) float64 { return 100 + 1.4*float64(i) }, func(i int) float64 { return 150 + float64(i) }))
	assert.ErrorContains(t, err, "RSS (MiB) grows steadily")
	assert.ErrorContains(t, err, "goroutines grows steadily")
	assert.NoError(t, flat(series(func(i int) float64 { return 85 + noise[i%10]/4 }, func(i int) float64 { return 155 + 3*noise[(i*3)%10] })))
	leak := series(func(int) float64 { return 85 }, func(int) float64 { return 150 })
	for i := range leak[15:] {
		leak[15+i].Watches = 44
	}
	assert.ErrorContains(t, flat(leak), "open watches grows steadily")
	noisyLeak := series(func(int) float64 { return 85 }, func(i int) float64 { return 150 + 2*float64(i) + 3*noise[(i*7)%10] })
	assert.ErrorContains(t, flat(noisyLeak), "goroutines grows steadily", "a leak of two goroutines a minute stands out of a scatter of ±36 over 30 minutes")
	// A short soak's samples (make test's, 40 s), goroutines scattered by
	// the work in flight: the trend rises more than a tenth of the mean,
	// and is noise.
	short := []soakSample{
		{At: 6 * time.Second, RSSMiB: 68.9, Goroutines: 220, Watches: 50},
		{At: 15 * time.Second, RSSMiB: 68.7, Goroutines: 193, Watches: 50},
		{At: 24 * time.Second, RSSMiB: 69.1, Goroutines: 179, Watches: 50},
		{At: 32 * time.Second, RSSMiB: 69.0, Goroutines: 256, Watches: 50},
		{At: 40 * time.Second, RSSMiB: 69.4, Goroutines: 221, Watches: 50},
	}
	assert.NoError(t, flat(short))
	for i := range short {
		short[i].Goroutines = 200 + 30*i
	}
	assert.ErrorContains(t, flat(short), "noise stays below 7.0", "goroutines rising by 30 every sample over the same four samples is growth; Student's t at 99 %, 2 degrees of freedom")
}
