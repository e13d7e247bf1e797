// Command bench runs many tenants through a full upgrade on a real
// kube-apiserver + etcd: the express-sequencer binary in its own process
// (webhooks and sequencer), the simulated Express operator with instant
// readiness, and a driver that creates and upgrades the tenants. It prints
// the release latency (a prerequisite turning Ready on target → its
// dependent starting to roll), the total time, the sequencer's API calls and
// its peak memory, and fails if any tenant rolled out of order. With -soak
// it changes the tenants one after another for a long time instead, and
// samples the sequencer as it goes (soak.go).
//
//	make bench                      # 1,000 tenants × 8 nodes
//	make soak                       # 30 minutes at 2 tenant changes/s
//	cd test && go run ./bench -tenants 50 # a quick look
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"
	"github.com/medallia/express-sequencer/internal/testing/simoperator"
	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
)

const (
	v1 = "express-e689.151"
	v2 = "express-e689.154"
)

type options struct {
	tenants, nodes, workers int
	settle, timeout         time.Duration
	binary                  string
	// cacheFloor builds express-sequencer with -tags cachefloor: its fresh
	// reads read the cache (a floor, not a configuration).
	cacheFloor  bool
	memoryLimit string
	rate        float64
	slowest     int
	admission   int
	// change is what the upgrade changes: "version" or "config"
	// (configChangeset only).
	change string
	// rolloutID: nodes carry the rollout-id the tenant chart renders.
	rolloutID  bool
	memProfile string
	// cpuProfile: a directory to write CPU profiles of the sequencer and
	// kube-apiserver into, taken over the first cpuSeconds of the upgrade.
	cpuProfile string
	cpuSeconds int
	// crash: after the upgrade, delete every pod of this many tenants at
	// once.
	crash int
	// concurrency: express-sequencer's --max-concurrent-reconciles.
	concurrency int
	// statefulSets: every pod is owned by its node's StatefulSet, which the
	// sequencer reads on its fresh reads.
	statefulSets bool
	// cluster: run on Kubernetes' own control loops (cluster.go);
	// controllerQPS, when positive, is kube-controller-manager's client rate
	// limit there (its own default is 20 requests/s, burst 30).
	cluster       bool
	controllerQPS int
	// fleetViewOnly: provision the tenants, time the fleet view, stop.
	fleetViewOnly bool
	// recheckReleases: express-sequencer's --recheck-releases.
	recheckReleases bool
	// noAudit runs express-sequencer without its order auditor
	// (--audit=false), to measure what the auditor costs.
	noAudit bool
	// scopedReads: express-sequencer's --scoped-reads.
	scopedReads bool
	// podReadsByName: express-sequencer's --pod-reads-by-name.
	podReadsByName bool
	// noWatchCache: kube-apiserver --watch-cache=false.
	noWatchCache bool
	// pin gives kube-apiserver and etcd one core, express-sequencer and
	// the driver the other (pin.go).
	pin bool
}

// phase names what a node is Ready on: its version and configChangeset.
func phase(version, config string) string { return version + "/" + config }

const configChange = "changeset-2"

// upgraded is the phase every node reaches in the upgrade.
func (o options) upgraded() string {
	if o.change == "config" {
		return phase(v1, configChange)
	}
	return phase(v2, "")
}

func main() {
	var o options
	flag.IntVar(&o.tenants, "tenants", 1000, "Tenants to create and upgrade, one namespace each.")
	flag.IntVar(&o.nodes, "nodes", 8, "Nodes per tenant: be and fe1…fe(n-1).")
	flag.IntVar(&o.workers, "workers", 16, "Parallel writers creating and updating tenants.")
	flag.DurationVar(&o.settle, "settle-time", time.Second, "express-sequencer's --settle-time.")
	flag.DurationVar(&o.timeout, "timeout", time.Hour, "Give up after this long. On 2 cores, 1,000 tenants × 8 took from 20 minutes to more than 30 for provisioning and upgrade.")
	flag.Float64Var(&o.rate, "upgrade-rate", 0, "Tenants upgraded per second; 0 upgrades them all at once.")
	flag.IntVar(&o.slowest, "slowest", 0, "Also list the N slowest releases, to find where a tail comes from.")
	flag.IntVar(&o.admission, "admission", 0, "After the upgrade, also measure N pod creates with and without the pod webhook, and the first release after a change applied node by node with and without rollout-id (N tenants each).")
	flag.StringVar(&o.change, "change", "version", "What the upgrade changes on every node: version (expressVersion) or config (configChangeset only).")
	flag.BoolVar(&o.rolloutID, "rollout-id", true, "Nodes carry a rollout-id per change, as the tenant chart renders it; false leaves change grouping to --settle-time.")
	flag.IntVar(&o.crash, "crash", 0, "After the upgrade, delete every pod of the first N tenants at once and measure their recovery through the pod gates.")
	flag.StringVar(&o.memProfile, "memprofile", "", "Write the sequencer's heap profile at the upgrade's largest live heap (sampled every 3 s) to this file.")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "Write CPU profiles of the sequencer and of kube-apiserver, taken over the first -cpu-seconds of the upgrade, into this directory (sequencer.pprof, kube-apiserver.pprof).")
	flag.IntVar(&o.cpuSeconds, "cpu-seconds", 30, "How long -cpuprofile profiles.")
	flag.BoolVar(&o.statefulSets, "statefulsets", true, "Every pod is owned by its node's StatefulSet (one replica), as the Express operator's are: the sequencer's fresh reads then read each node's StatefulSet too. false creates bare pods.")
	flag.IntVar(&o.concurrency, "max-concurrent-reconciles", 32, "express-sequencer's --max-concurrent-reconciles: tenants sequenced in parallel.")
	flag.BoolVar(&o.cluster, "cluster", false, "Run on Kubernetes' own control loops: kube-controller-manager (StatefulSet controller, garbage collector), kube-scheduler and KWOK as the kubelet of 4 fake Nodes, the Express operator's part one StatefulSet per node (expressoperator), instead of the simulated operator that plays all of them.")
	flag.IntVar(&o.controllerQPS, "controller-qps", 0, "With -cluster: kube-controller-manager's --kube-api-qps (burst 1.5 times it); 0 keeps its default, 20 requests/s with bursts of 30, which bounds how fast StatefulSets create and replace pods.")
	flag.BoolVar(&o.noAudit, "no-audit", false, "Run express-sequencer with --audit=false: without the order auditor, to measure what it costs beside the sequencer.")
	flag.BoolVar(&o.recheckReleases, "recheck-releases", true, "express-sequencer's --recheck-releases: the webhooks judge every release again on a fresh read of its tenant; false measures without that read.")
	flag.BoolVar(&o.scopedReads, "scoped-reads", true, "express-sequencer's --scoped-reads (its default): a release is planned on the cache with the workload it rests on read by name, the whole tenant read by the release guard alone; false reads the whole tenant in the sequencer too.")
	flag.BoolVar(&o.podReadsByName, "pod-reads-by-name", false, "express-sequencer's --pod-reads-by-name (experimental): the pod webhook lets a new Express pod start on a read by name of what its start rests on, read twice to be one moment; false (its default) reads the whole tenant.")
	flag.BoolVar(&o.noWatchCache, "no-watch-cache", false, "Run kube-apiserver with --watch-cache=false: every LIST and WATCH is served by etcd, a consistent LIST with no wait for the watch cache to prove itself current. To measure what that wait costs releases and pod admissions; no real cluster runs so (every watch becomes an etcd watch).")
	flag.BoolVar(&o.pin, "pin", false, "Pin kube-apiserver and etcd (and, with -cluster, the control loops) to the first core, express-sequencer and the driver to the second (taskset), so that what the sequencer costs kube-apiserver shows apart from what it costs itself.")
	flag.StringVar(&o.binary, "binary", "", "express-sequencer binary to measure; built from ./cmd/express-sequencer when empty.")
	flag.BoolVar(&o.cacheFloor, "cache-floor", false, "Build express-sequencer with -tags cachefloor, whose every fresh read (the sequencer's, the release guard's, the pod webhook's) reads its cache instead of the API server: what everything but the fresh reads costs, a floor for what reading less could reach. Releases may go out of order where the cache lags; no release is built so.")
	flag.StringVar(&o.memoryLimit, "sequencer-memory-limit", "", "GOMEMLIMIT for express-sequencer alone (e.g. 140MiB): its memory against its CPU; empty leaves it to the binary.")
	var so soakOptions
	flag.DurationVar(&so.duration, "soak", 0, "Soak instead: after creating the tenants, change them one after another at -upgrade-rate tenants/s (each to its next version) for this long, sampling the sequencer's RSS, goroutines and kube-apiserver's open watches every -soak-every; then watch the settled fleet for -soak-quiet and fail on any write, on a rollout out of order, or on growth beyond noise.")
	flag.DurationVar(&so.every, "soak-every", time.Minute, "With -soak: how often to sample.")
	flag.DurationVar(&so.quiet, "soak-quiet", time.Minute, "With -soak: how long to watch the settled fleet for writes.")
	flag.StringVar(&so.plot, "soak-plot", "", "With -soak: write a PNG plot of the samples to this file.")
	flag.BoolVar(&o.fleetViewOnly, "fleet-view-only", false, "Only create the tenants and, once they are provisioned, time the fleet view (kubectl express status -A); no upgrade.")
	flag.Parse()
	if o.cacheFloor && o.binary != "" {
		fmt.Fprintln(os.Stderr, "bench: -cache-floor builds the binary it measures: give it without -binary")
		os.Exit(2)
	}
	var err error
	if o.fleetViewOnly {
		err = runFleetView(o, os.Stdout)
	} else if so.duration > 0 {
		if o.rate <= 0 {
			o.rate = 2
		}
		err = runSoak(o, so, os.Stdout)
	} else {
		err = run(o, os.Stdout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// Result is what a run measured.
type Result struct {
	Tenants, Nodes     int
	Provision, Upgrade time.Duration
	// Applied is how long the driver took to apply the change to every
	// node (through the webhooks), from the start of the upgrade.
	Applied    time.Duration
	Latencies  []time.Duration
	Slowest    []string
	OutOfOrder []string
	APICalls   int
	// Violations are the order violations the auditor counted (0 where
	// the order held; not counted with -no-audit).
	Violations int
	// UpgradeWrites are the sequencer's writes during the upgrade, by verb
	// and resource.
	UpgradeWrites map[string]int
	// EventsDropped and EventWriteFailures count the Events of the upgrade
	// that were dropped (a full queue) or refused by the API server.
	EventsDropped, EventWriteFailures int
	// Steps are the mean times of the steps of a reconcile that releases
	// and of the webhooks that read the tenant (keyed webhook/step), during
	// the upgrade.
	Steps      map[string]time.Duration
	PeakRSSKiB int
	// CPU is the sequencer's CPU time over the whole run: its start, the
	// fleet view and the crash and admission rounds included.
	CPU time.Duration
	// StackCPU is the CPU time, over provisioning and upgrade alone, of
	// each process the benchmark started (kube-apiserver, etcd,
	// express-sequencer and, with -cluster, the control loops and KWOK),
	// by name.
	StackCPU map[string]time.Duration
	// Requests are express-sequencer's requests to the API server over
	// provisioning and upgrade, keyed "caller verb resource".
	Requests map[string]int
	// CacheWaits is what kube-apiserver's watch cache made reads wait over
	// provisioning and upgrade, by resource; nil without a watch cache.
	CacheWaits map[string]cacheWait
	// Crash is the crash measurement, when asked for.
	Crash CrashResult
	// FleetView is what the fleet view costs on the settled fleet.
	FleetView FleetViewResult
}

// Percentile returns the p-th percentile (0–100) of the release latencies.
func (r Result) Percentile(p float64) time.Duration {
	if len(r.Latencies) == 0 {
		return 0
	}
	s := slices.Clone(r.Latencies)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p / 100)
	return s[i]
}

func run(o options, out io.Writer) error {
	res, err := measure(o, out)
	if err != nil {
		return err
	}
	how := "all at once"
	if o.rate > 0 {
		how = fmt.Sprintf("%g tenants/s", o.rate)
	}
	grouping := "rollout-id"
	if !o.rolloutID {
		grouping = "settle time " + o.settle.String()
	}
	stack := "the simulated operator, instant readiness"
	if o.cluster {
		stack = "Kubernetes' own control loops, KWOK's readiness"
	}
	fmt.Fprintf(out, "\n%d tenants × %d nodes, %s change %s (%s, change grouping by %s)\n", res.Tenants, res.Nodes, o.change, how, stack, grouping)
	reads := "the workload a release rests on, by name (--scoped-reads)"
	if !o.scopedReads || !o.recheckReleases {
		reads = "the whole tenant, consistent LISTs"
	}
	if o.cacheFloor {
		reads = "none, every fresh read from the cache (-cache-floor: a floor, not a configuration)"
	}
	cores := "shared by every process"
	if o.pin {
		cores = "kube-apiserver and etcd on core " + apiServerCores + ", express-sequencer and the driver on core " + sequencerCores
	}
	podReads := "the whole tenant"
	if o.podReadsByName {
		podReads = "what a pod's start rests on, by name, read twice (--pod-reads-by-name)"
	}
	server := "kube-apiserver's watch cache on (its default)"
	if o.noWatchCache {
		server = "kube-apiserver --watch-cache=false (every read from etcd)"
	}
	fmt.Fprintf(out, "  the sequencer's fresh read: %s; the pod webhook's: %s; cores: %s; %s\n", reads, podReads, cores, server)
	fmt.Fprintf(out, "  provisioning:            %s\n", res.Provision.Round(time.Millisecond))
	fmt.Fprintf(out, "  upgrade:                 %s (the change applied to every node after %s)\n", res.Upgrade.Round(time.Millisecond), res.Applied.Round(time.Millisecond))
	fmt.Fprintf(out, "  release latency p50:     %s\n", res.Percentile(50).Round(100*time.Microsecond))
	fmt.Fprintf(out, "  release latency p99:     %s\n", res.Percentile(99).Round(100*time.Microsecond))
	fmt.Fprintf(out, "  release latency max:     %s  (%d releases)\n", res.Percentile(100).Round(100*time.Microsecond), len(res.Latencies))
	fmt.Fprintf(out, "  sequencer API calls:     %d, the whole run\n", res.APICalls)
	reportRequests(out, res.Requests, 2*res.Tenants*res.Nodes)
	total, kinds := 0, make([]string, 0, len(res.UpgradeWrites))
	for k, v := range res.UpgradeWrites {
		if !strings.HasPrefix(k, breakdownPrefix) {
			total += v
		}
		kinds = append(kinds, k)
	}
	slices.SortFunc(kinds, func(a, b string) int {
		if pa, pb := strings.HasPrefix(a, breakdownPrefix), strings.HasPrefix(b, breakdownPrefix); pa != pb {
			if pa {
				return 1
			}
			return -1
		}
		return strings.Compare(a, b)
	})
	rollouts := float64(res.Tenants * res.Nodes)
	fmt.Fprintf(out, "  sequencer writes in the upgrade: %d, %.2f per node rollout\n", total, float64(total)/rollouts)
	for _, k := range kinds {
		fmt.Fprintf(out, "    %-28s %6d  %.2f per node rollout\n", k, res.UpgradeWrites[k], float64(res.UpgradeWrites[k])/rollouts)
	}
	fmt.Fprintf(out, "  Events not written:      %d dropped (queue full), %d refused\n", res.EventsDropped, res.EventWriteFailures)
	if len(res.Steps) > 0 {
		fmt.Fprint(out, "  a reconcile that releases, mean time by step:")
		for _, s := range releaseSteps {
			fmt.Fprintf(out, " %s %s", s, res.Steps[s].Round(10*time.Microsecond))
		}
		fmt.Fprintln(out)
		fmt.Fprint(out, "  the webhooks that read the tenant, mean time by step:")
		for _, s := range admissionSteps {
			fmt.Fprintf(out, " %s %s", s, res.Steps[s].Round(10*time.Microsecond))
		}
		fmt.Fprintln(out)
	}
	limit := ""
	if o.memoryLimit != "" {
		limit = " (GOMEMLIMIT " + o.memoryLimit + ")"
	}
	fmt.Fprintf(out, "  sequencer peak RSS:      %d MiB%s\n", res.PeakRSSKiB/1024, limit)
	fmt.Fprintf(out, "  sequencer CPU time:      %s, the whole run (%s wall clock for both phases)\n", res.CPU.Round(time.Second), (res.Provision + res.Upgrade).Round(time.Second))
	reportStackCPU(out, res.StackCPU, 2*o.tenants*o.nodes)
	reportCacheWaits(out, res.CacheWaits)
	reportFleetView(out, res.FleetView)
	if o.slowest > 0 {
		idx := make([]int, len(res.Latencies))
		for i := range idx {
			idx[i] = i
		}
		slices.SortFunc(idx, func(a, b int) int { return int(res.Latencies[b] - res.Latencies[a]) })
		fmt.Fprintln(out, "  slowest releases:")
		for _, i := range idx[:min(o.slowest, len(idx))] {
			fmt.Fprintln(out, "   ", res.Slowest[i])
		}
	}
	if len(res.OutOfOrder) > 0 {
		return fmt.Errorf("%d tenants rolled out of order, e.g. %s", len(res.OutOfOrder), res.OutOfOrder[0])
	}
	if o.noAudit {
		fmt.Fprintln(out, "  order auditor:           off (-no-audit)")
	} else if res.Violations > 0 {
		return fmt.Errorf("the order auditor counted %d order violations where the benchmark's own check found the order kept", res.Violations)
	} else {
		fmt.Fprintln(out, "  order auditor:           0 violations counted")
	}
	fmt.Fprintln(out, "  every tenant rolled in order: fe1, fe2, be, fe3, …")
	if o.crash > 0 {
		return reportCrash(out, res.Crash, res.Nodes)
	}
	return nil
}

// recorder keeps the operator's rollout starts and readiness per node.
type recorder struct {
	mu       sync.Mutex
	readyOn  map[string]map[string]bool     // version → namespace/node Ready on it
	released map[string][]time.Time         // namespace/node → gate removals seen
	starts   map[string][]simoperator.Start // by namespace
	readyAt  map[string]time.Time           // namespace/node/version
	ready    map[string]*atomic.Int64       // version → nodes Ready on it
	crash    *crashWatch                    // set by a crash measurement
}

// readyCount counts the nodes of a namespace Ready on version.
func (r *recorder) readyCount(ns, version string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	count := 0
	for node := range r.readyOn[version] {
		if strings.HasPrefix(node, ns+"/") {
			count++
		}
	}
	return count
}

func (r *recorder) onUngated(ns, node string, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released[ns+"/"+node] = append(r.released[ns+"/"+node], at)
}

func (r *recorder) onStart(s simoperator.Start) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.starts[s.Namespace] = append(r.starts[s.Namespace], s)
}

func (r *recorder) onReady(e simoperator.Ready) {
	r.mu.Lock()
	ph := phase(e.Version, e.Config)
	r.readyAt[e.Namespace+"/"+e.Node+"/"+ph] = e.At
	first := !r.readyOn[ph][e.Namespace+"/"+e.Node]
	if r.readyOn[ph] == nil {
		r.readyOn[ph] = map[string]bool{}
	}
	r.readyOn[ph][e.Namespace+"/"+e.Node] = true
	if r.crash != nil {
		r.crash.onReadyAfterCrash(e)
	}
	r.mu.Unlock()
	if c, ok := r.ready[ph]; ok && first {
		c.Add(1) // nodes, not events: a node Ready twice counts once
	}
}

func measure(o options, out io.Writer) (Result, error) {
	res := Result{Tenants: o.tenants, Nodes: o.nodes}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	st, stop, err := startStack(ctx, o, out)
	if err != nil {
		return res, err
	}
	defer stop()
	cp, c, rec, seq := st.cp, st.c, st.rec, st.seq

	total := int64(o.tenants * o.nodes)
	fmt.Fprintf(out, "Creating %d tenants of %d nodes…\n", o.tenants, o.nodes)
	stackBefore, err := stackCPU(seq.Process.Pid)
	if err != nil {
		return res, err
	}
	requestsBefore, err := requests(st.metricsURL)
	if err != nil {
		return res, err
	}
	waitsBefore, err := apiServerCacheWaits(ctx, cp.Config)
	if err != nil {
		return res, err
	}
	start := time.Now()
	if err := parallel(ctx, o.workers, o.tenants, func(i int) error { return createTenant(ctx, c, i, o.nodes, o.rolloutID) }); err != nil {
		return res, err
	}
	if err := waitCount(ctx, out, "provisioned", rec.ready[phase(v1, "")], total); err != nil {
		return res, err
	}
	res.Provision = time.Since(start)

	metricsURL := st.metricsURL
	writesBefore, err := settledWrites(ctx, metricsURL)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(out, "Changing every node to %s…\n", o.upgraded())
	rec.mu.Lock()
	mark := map[string]int{}
	for ns, s := range rec.starts {
		mark[ns] = len(s)
	}
	rec.mu.Unlock()
	start = time.Now()
	var peak *heapPeak
	sampling, stopSampling := context.WithCancel(ctx)
	defer stopSampling()
	if o.memProfile != "" {
		peak = watchHeapPeak(sampling, st.pprofURL+"/debug/pprof/heap", 3*time.Second)
	}
	profiled := make(chan error, 1)
	if o.cpuProfile != "" {
		go func() {
			profiled <- saveCPUProfiles(ctx, o.cpuProfile, o.cpuSeconds, st.pprofURL, cp.Config)
		}()
	} else {
		profiled <- nil
	}
	var pace <-chan time.Time
	if o.rate > 0 {
		t := time.NewTicker(time.Duration(float64(time.Second) / o.rate))
		defer t.Stop()
		pace = t.C
	}
	if err := parallel(ctx, o.workers, o.tenants, func(i int) error {
		if pace != nil {
			<-pace
		}
		return upgradeTenant(ctx, c, i, o)
	}); err != nil {
		return res, err
	}
	res.Applied = time.Since(start)
	if err := waitCount(ctx, out, "upgraded", rec.ready[o.upgraded()], total); err != nil {
		return res, err
	}
	res.Upgrade = time.Since(start)
	stopSampling()
	if err := <-profiled; err != nil {
		return res, err
	}
	writesAfter, err := settledWrites(ctx, metricsURL)
	if err != nil {
		return res, err
	}
	stackAfter, err := stackCPU(seq.Process.Pid)
	if err != nil {
		return res, err
	}
	requestsAfter, err := requests(metricsURL)
	if err != nil {
		return res, err
	}
	res.Requests = requestsSince(requestsBefore, requestsAfter)
	res.StackCPU = map[string]time.Duration{}
	for name, cpu := range stackAfter {
		res.StackCPU[name] = cpu - stackBefore[name]
	}
	waitsAfter, err := apiServerCacheWaits(ctx, cp.Config)
	if err != nil {
		return res, err
	}
	res.CacheWaits = cacheWaitsSince(waitsBefore, waitsAfter)
	if res.FleetView, err = measureFleetView(ctx, st.cfg, c, o.tenants); err != nil {
		return res, err
	}
	if peak != nil {
		if err := peak.save(o.memProfile, out); err != nil {
			return res, err
		}
	}
	res.UpgradeWrites, res.Steps = map[string]int{}, stepMeans(writesBefore, writesAfter)
	for k, v := range writesAfter {
		d := v - writesBefore[k]
		switch {
		case strings.HasPrefix(k, stepSum+" "), strings.HasPrefix(k, stepCount+" "):
		case k == eventsDropped:
			res.EventsDropped = d
		case k == eventWriteFailures:
			res.EventWriteFailures = d
		case d > 0:
			res.UpgradeWrites[k] = d
		}
	}

	order := defaults.Builtin().Upgrade.Sequence(keys(o.nodes))
	rec.mu.Lock()
	for i := 0; i < o.tenants; i++ {
		ns := namespace(i)
		var got, detail []string
		for _, s := range rec.starts[ns][mark[ns]:] {
			got = append(got, s.Node)
			detail = append(detail, s.Node+"@"+s.Version)
		}
		var want []string
		for _, k := range order {
			want = append(want, "t-"+k.String())
		}
		if !slices.Equal(got, want) {
			res.OutOfOrder = append(res.OutOfOrder, fmt.Sprintf("%s: %v", ns, detail))
			continue
		}
		for j := 1; j < len(want); j++ {
			readyPrev := rec.readyAt[ns+"/"+want[j-1]+"/"+o.upgraded()]
			ungated := rec.released[ns+"/"+want[j]]
			released := ungated[len(ungated)-1] // the upgrade's release is the last
			res.Latencies = append(res.Latencies, released.Sub(readyPrev))
			res.Slowest = append(res.Slowest, fmt.Sprintf("%s %s after %s: %s (ready %s, released %s)",
				ns, want[j], want[j-1], released.Sub(readyPrev).Round(time.Millisecond),
				readyPrev.Format("15:04:05.000"), released.Format("15:04:05.000")))
		}
	}
	rec.mu.Unlock()

	if o.crash > 0 {
		before, err := settledWrites(ctx, metricsURL)
		if err != nil {
			return res, err
		}
		if res.Crash, err = measureCrash(ctx, out, st.evict, rec, o); err != nil {
			return res, err
		}
		after, err := settledWrites(ctx, metricsURL)
		if err != nil {
			return res, err
		}
		res.Crash.Steps = stepMeans(before, after)
		res.Crash.PodReads = counted(before, after, podReadsPrefix)
	}
	if o.admission > 0 {
		if err := reportAdmission(ctx, out, c, rec, o); err != nil {
			return res, err
		}
	}
	res.PeakRSSKiB, err = procStatus(seq.Process.Pid, "VmHWM:")
	if err != nil {
		return res, err
	}
	if res.CPU, err = cpuTime(seq.Process.Pid); err != nil {
		return res, err
	}
	calls, err := metricSum(metricsURL, "rest_client_requests_total") // client-go's
	if err != nil {
		return res, err
	}
	res.APICalls = int(calls)
	if !o.noAudit {
		// The auditor judges the same rollouts without the planner: where
		// they kept the order, it must count nothing.
		if err := awaitJudged(metricsURL, time.Minute); err != nil {
			return res, err
		}
		v, err := metricSum(metricsURL, auditmetrics.Violations)
		if err != nil {
			return res, err
		}
		res.Violations = int(v)
	}
	return res, nil
}

func keys(n int) []defaults.Key {
	out := []defaults.Key{defaults.Backend}
	for i := 1; i < n; i++ {
		out = append(out, defaults.FrontendKey(i))
	}
	return out
}

func namespace(i int) string { return fmt.Sprintf("tenant-%05d", i) }

func createTenant(ctx context.Context, c client.Client, i, nodes int, rolloutID bool) error {
	ns := namespace(i)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	for _, k := range keys(nodes) {
		n := v2alpha1.NewNode(k.Kind())
		n.SetName(defaults.NodeName("t", k))
		n.SetNamespace(ns)
		*n.NodeSpec() = v2alpha1.NodeSpec{ClusterConfig: v2alpha1.ClusterConfig{ClusterName: "t"}, ExpressVersion: v1}
		if rolloutID {
			annotate(n, v2alpha1.AnnotationRolloutID, "install")
		}
		if err := c.Create(ctx, n); err != nil {
			return fmt.Errorf("creating %s/%s: %w", ns, n.GetName(), err)
		}
	}
	return nil
}

func upgradeTenant(ctx context.Context, c client.Client, i int, o options) error {
	return updateNodes(ctx, c, i, o.nodes, func(n v2alpha1.Node) {
		if o.change == "config" {
			n.NodeSpec().ConfigChangeset = configChange
		} else {
			n.NodeSpec().ExpressVersion = v2
		}
		if o.rolloutID {
			annotate(n, v2alpha1.AnnotationRolloutID, "upgrade")
		}
	})
}

// updateNodes edits every node of tenant i and writes it, again on a
// conflict.
func updateNodes(ctx context.Context, c client.Client, i, nodes int, edit func(v2alpha1.Node)) error {
	for _, k := range keys(nodes) {
		n := v2alpha1.NewNode(k.Kind())
		key := client.ObjectKey{Namespace: namespace(i), Name: defaults.NodeName("t", k)}
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := c.Get(ctx, key, n); err != nil {
				return err
			}
			edit(n)
			return c.Update(ctx, n)
		})
		if err != nil {
			return fmt.Errorf("changing %s: %w", key, err)
		}
	}
	return nil
}

func parallel(ctx context.Context, workers, n int, f func(int) error) error {
	var next atomic.Int64
	errs := make(chan error, workers)
	for w := 0; w < workers; w++ {
		go func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					errs <- ctx.Err()
					return
				}
				if err := f(i); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var all []error
	for w := 0; w < workers; w++ {
		all = append(all, <-errs)
	}
	return errors.Join(all...)
}

// waitCount waits until counter reaches total, printing progress.
func waitCount(ctx context.Context, out io.Writer, what string, counter *atomic.Int64, total int64) error {
	tick := time.NewTicker(2 * time.Second)
	defer tick.Stop()
	for counter.Load() < total {
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d/%d nodes %s when time ran out", counter.Load(), total, what)
		case <-tick.C:
			fmt.Fprintf(out, "  %d/%d nodes %s\n", counter.Load(), total, what)
		case <-time.After(50 * time.Millisecond):
		}
	}
	return nil
}

// cpuTime reads a process's user + system CPU time from /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of process %d: %w", pid, err)
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	fields := strings.Fields(string(data[strings.LastIndexByte(string(data), ')')+2:]))
	utime, err1 := strconv.Atoi(fields[11])
	stime, err2 := strconv.Atoi(fields[12])
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	const ticks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticks, nil
}

// Among the counted writes, breakdownPrefix marks a breakdown of writes
// counted already: conditionPrefix the condition applies by the reason
// written, conflictPrefix those refused for a stale read (409) by what
// followed (retried at the new version, or refused and planned again).
const (
	breakdownPrefix = "  of which "
	conditionPrefix = breakdownPrefix + "condition "
	conflictPrefix  = breakdownPrefix + "conflicting condition, "
	// readsPrefix marks the reconciles that released or recorded, by the
	// fresh read they were planned on: not writes, listed with them.
	readsPrefix = breakdownPrefix + "(not writes) planned on a fresh read of the "
	// podReadsPrefix marks the pod admissions made with --pod-reads-by-name, by
	// the read they were answered on.
	podReadsPrefix = breakdownPrefix + "(not writes) new pods answered on a fresh read of the "
)

// settledWrites reads the sequencer's writes once they have stopped
// changing for a second (the last conditions of a phase are written a
// moment after its last pod turns Ready).
func settledWrites(ctx context.Context, url string) (map[string]int, error) {
	last, err := writes(url)
	for err == nil {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
		var now map[string]int
		if now, err = writes(url); err == nil && maps.Equal(now, last) {
			return now, nil
		}
		last = now
	}
	return nil, err
}

// The histograms of where the time of a reconcile that releases goes and of
// the webhooks that read the tenant, and the keys of their sums and counts
// in what writes returns: stepSum+" "+step for the reconcile's steps,
// stepSum+" "+webhook+"/"+step for the webhooks'.
const (
	stepHistogram          = "express_sequencer_release_step_seconds"
	admissionStepHistogram = "express_sequencer_admission_step_seconds"
	stepSum                = "step seconds sum"
	stepCount              = "step count"
)

// stepMeans returns the mean time of each step observed between two reads
// of writes, keyed as writes keys them less stepSum.
func stepMeans(before, after map[string]int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for k, v := range after {
		step, ok := strings.CutPrefix(k, stepSum+" ")
		if !ok {
			continue
		}
		if n := after[stepCount+" "+step] - before[stepCount+" "+step]; n > 0 {
			out[step] = time.Duration((v-before[k])/n) * time.Microsecond
		}
	}
	return out
}

// counted are the counts of after whose keys start with prefix, less
// before's, where they grew.
func counted(before, after map[string]int, prefix string) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if strings.HasPrefix(k, prefix) && v > before[k] {
			out[k] = v - before[k]
		}
	}
	return out
}

// admissionSteps are the steps of express_sequencer_admission_step_seconds,
// as writes keys them.
var admissionSteps = []string{"release-guard/fresh_read", "release-guard/decide", "pods/scoped_read", "pods/fresh_read", "pods/decide"}

// releaseSteps are the steps of express_sequencer_release_step_seconds in
// the order they happen.
var releaseSteps = []string{"queue", "plan", "scoped_read", "fresh_read", "records", "release", "rest"}

// The counters of Events the sequencer did not write.
const (
	eventsDropped      = "express_sequencer_events_dropped_total"
	eventWriteFailures = "express_sequencer_event_write_failures_total"
)

// writes reads express_sequencer_api_writes_total by verb and resource, the
// condition writes by reason, the Events not written, and the sums and
// counts of express_sequencer_release_step_seconds by step (in
// microseconds).
func writes(url string) (map[string]int, error) {
	families, err := scrape(url)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, name := range []string{eventsDropped, eventWriteFailures} {
		if v, ok := sum(families, name, nil); ok {
			out[name] = int(v)
		}
	}
	for _, m := range families["express_sequencer_api_writes_total"].GetMetric() {
		out[label(m, "verb")+" "+label(m, "resource")] += int(value(m))
	}
	for _, m := range families["express_sequencer_condition_writes_total"].GetMetric() {
		out[conditionPrefix+label(m, "reason")] += int(value(m)) // a breakdown of the applies, not more writes
	}
	for _, m := range families["express_sequencer_condition_conflicts_total"].GetMetric() {
		out[conflictPrefix+label(m, "outcome")] += int(value(m))
	}
	for _, m := range families["express_sequencer_release_reads_total"].GetMetric() {
		k := readsPrefix + label(m, "read")
		if f := label(m, "fallback"); f != "none" {
			k += ", read whole for " + f
		}
		out[k] += int(value(m))
	}
	for _, m := range families["express_sequencer_pod_admission_reads_total"].GetMetric() {
		k := podReadsPrefix + label(m, "read")
		switch f := label(m, "fallback"); {
		case f == "none":
		case label(m, "read") == "decision":
			k += ", " + f // held: gated on the read by name
		default:
			k += ", read whole for " + f
		}
		out[k] += int(value(m))
	}
	for _, m := range families[stepHistogram].GetMetric() {
		step := label(m, "step")
		out[stepSum+" "+step] = int(m.GetHistogram().GetSampleSum() * 1e6) // in microseconds, to stay an int
		out[stepCount+" "+step] = int(m.GetHistogram().GetSampleCount())
	}
	for _, m := range families[admissionStepHistogram].GetMetric() {
		step := label(m, "webhook") + "/" + label(m, "step")
		out[stepSum+" "+step] = int(m.GetHistogram().GetSampleSum() * 1e6)
		out[stepCount+" "+step] = int(m.GetHistogram().GetSampleCount())
	}
	return out, nil
}

// metricSum sums the samples of the metric called name (every label set)
// on a /metrics endpoint; an error when it has none.
func metricSum(url, name string) (float64, error) {
	families, err := scrape(url)
	if err != nil {
		return 0, err
	}
	total, ok := sum(families, name, nil)
	if !ok {
		return 0, fmt.Errorf("no %s at %s", name, url)
	}
	return total, nil
}
