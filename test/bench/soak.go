package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"
	"gonum.org/v1/gonum/stat"
	"gonum.org/v1/gonum/stat/distuv"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
	"github.com/medallia/express-sequencer/internal/defaults"

	"github.com/medallia/express-sequencer/test/framework/auditmetrics"
)

// soakOptions are the soak's own settings (-soak).
type soakOptions struct {
	// duration is how long changes keep coming; every is how often the
	// sequencer is sampled; quiet is how long the fleet is watched for
	// writes once every change has settled.
	duration, every, quiet time.Duration
	// plot is where the PNG of the samples goes ("" for none).
	plot string
}

// soakSample is the sequencer at one moment of a soak.
type soakSample struct {
	At         time.Duration
	RSSMiB     float64
	Goroutines int
	// Watches are kube-apiserver's open watch requests, from every client:
	// the sequencer's, and the simulated operator's, which do not change.
	Watches int
	// Rollouts are the node rollouts completed since the sample before;
	// Writes, Events and Conditions the sequencer's writes since (Events
	// created, condition applies, and every write).
	Rollouts, Writes, Events, Conditions int
}

// SoakResult is what a soak measured.
type SoakResult struct {
	Samples []soakSample
	// Changes are the tenant changes made; Skipped those not made because
	// the tenant's change before had not finished rolling.
	Changes, Skipped int
	OutOfOrder       []string
	// Violations are the order violations the auditor counted over the
	// soak (-1 with -no-audit).
	Violations int
	// QuietWrites are the sequencer's writes, by verb and resource, while
	// nothing changed after the soak: any is a write loop.
	QuietWrites map[string]int
}

// soakVersion is the version of a tenant's nth change in a soak.
func soakVersion(n int) string { return fmt.Sprintf("express-e689.%d", 1000+n) }

// runSoak creates the tenants, then changes them one after another at
// o.rate tenants/s for so.duration, every node of a tenant to its next
// version, sampling the sequencer every so.every; then it watches the
// settled fleet for so.quiet, checks every rollout's order, and fails on a
// write loop, an order broken, or growth that is not noise.
func runSoak(o options, so soakOptions, out io.Writer) error {
	res, err := soak(o, so, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nSoak: %d tenants × %d nodes, %g tenant changes/s for %s (%d changes, %d skipped: still rolling)\n",
		o.tenants, o.nodes, o.rate, so.duration, res.Changes, res.Skipped)
	fmt.Fprintln(out, "  minute  RSS MiB  goroutines  watches  rollouts  writes  events  conditions  writes/rollout")
	for _, s := range res.Samples {
		perRollout := 0.0
		if s.Rollouts > 0 {
			perRollout = float64(s.Writes) / float64(s.Rollouts)
		}
		fmt.Fprintf(out, "  %6.1f  %7.1f  %10d  %7d  %8d  %6d  %6d  %10d  %14.2f\n", s.At.Minutes(), s.RSSMiB, s.Goroutines, s.Watches, s.Rollouts, s.Writes, s.Events, s.Conditions, perRollout)
	}
	if so.plot != "" {
		if err := plotSoak(res.Samples, so.plot); err != nil {
			return err
		}
		fmt.Fprintf(out, "  plot: %s\n", so.plot)
	}
	var problems []error
	if len(res.OutOfOrder) > 0 {
		problems = append(problems, fmt.Errorf("%d rollouts out of order, e.g. %s", len(res.OutOfOrder), res.OutOfOrder[0]))
	} else {
		fmt.Fprintf(out, "  every one of the %d changes rolled in order, each node after the one before it was Ready\n", res.Changes)
	}
	switch {
	case res.Violations > 0:
		problems = append(problems, fmt.Errorf("the order auditor counted %d order violations over the soak", res.Violations))
	case res.Violations == 0:
		fmt.Fprintf(out, "  the order auditor counted 0 violations over the %d changes\n", res.Changes)
	}
	if len(res.QuietWrites) > 0 {
		problems = append(problems, fmt.Errorf("the sequencer wrote while nothing changed for %s: %v", so.quiet, res.QuietWrites))
	} else {
		fmt.Fprintf(out, "  no write in the %s of quiet after the soak: no Event or condition written in a loop\n", so.quiet)
	}
	if err := flat(res.Samples); err != nil {
		problems = append(problems, err)
	} else {
		fmt.Fprintln(out, "  RSS, goroutines and watches flat: no steady growth in their trends")
	}
	if writes := sumOf(res.Samples, func(s soakSample) int { return s.Writes }); writes == 0 {
		problems = append(problems, errors.New("no write counted during the soak: the write counters are not read, and the quiet check would prove nothing"))
	}
	return errors.Join(problems...)
}

// trendConfidence is how sure the growth check must be that a series'
// trend is not noise before it calls it growth: the one-sided confidence of
// Student's t test on the trend's slope.
const trendConfidence = 0.99

// flat fails on steady growth: the least-squares slope of each series over
// the samples (the first, taken while the caches fill, left out), times the
// soak's span, is the growth the trend explains. It may not exceed a fifth
// of the mean RSS, a tenth of the mean goroutines plus 10, or half a watch —
// unless the trend could be noise: a slope within what the scatter around
// the line allows (Student's t at trendConfidence, n−2 degrees of freedom)
// is not growth. A short soak's few samples, taken while work is in flight,
// scatter widely (goroutines 179–256 in 40 s); a leak over many samples
// stands out of any scatter.
func flat(samples []soakSample) error {
	if len(samples) < 4 {
		return fmt.Errorf("%d samples: too few to tell growth from noise", len(samples))
	}
	s := samples[1:]
	span := s[len(s)-1].At.Minutes() - s[0].At.Minutes()
	minutes := make([]float64, len(s))
	for i, x := range s {
		minutes[i] = x.At.Minutes()
	}
	// The samples' spread in time: the slope's standard error is the
	// scatter around the line over it.
	mx := stat.Mean(minutes, nil)
	var sxx float64
	for _, m := range minutes {
		sxx += (m - mx) * (m - mx)
	}
	if sxx == 0 {
		return errors.New("every sample was taken at the same moment: no trend to tell")
	}
	critical := distuv.StudentsT{Mu: 0, Sigma: 1, Nu: float64(len(s) - 2)}.Quantile(trendConfidence)
	var errs []error
	check := func(what string, f func(soakSample) float64, allowed func(mean float64) float64) {
		ys := make([]float64, len(s))
		for i, x := range s {
			ys[i] = f(x)
		}
		intercept, slope := stat.LinearRegression(minutes, ys, nil, false)
		mean := stat.Mean(ys, nil)
		growth := slope * span
		if growth <= allowed(mean) {
			return
		}
		var residuals float64
		for i := range ys {
			r := ys[i] - (intercept + slope*minutes[i])
			residuals += r * r
		}
		stderr := math.Sqrt(residuals / float64(len(ys)-2) / sxx)
		if stderr > 0 && slope/stderr < critical {
			return
		}
		over := time.Duration(span * float64(time.Minute)).Round(time.Second)
		errs = append(errs, fmt.Errorf("%s grows steadily: %+.1f over %s by its trend (mean %.1f, allowed %.1f; the slope's t %.1f, noise stays below %.1f)", what, growth, over, mean, allowed(mean), slope/stderr, critical))
	}
	check("RSS (MiB)", func(x soakSample) float64 { return x.RSSMiB }, func(mean float64) float64 { return mean / 5 })
	check("goroutines", func(x soakSample) float64 { return float64(x.Goroutines) }, func(mean float64) float64 { return mean/10 + 10 })
	check("open watches", func(x soakSample) float64 { return float64(x.Watches) }, func(float64) float64 { return 0.5 })
	return errors.Join(errs...)
}

func soak(o options, so soakOptions, out io.Writer) (SoakResult, error) {
	var res SoakResult
	ctx, cancel := context.WithTimeout(context.Background(), so.duration+o.timeout)
	defer cancel()
	st, stop, err := startStack(ctx, o, out)
	if err != nil {
		return res, err
	}
	defer stop()
	apiserver, err := kubernetes.NewForConfig(st.cfg)
	if err != nil {
		return res, err
	}
	fmt.Fprintf(out, "Creating %d tenants of %d nodes…\n", o.tenants, o.nodes)
	if err := parallel(ctx, o.workers, o.tenants, func(i int) error { return createTenant(ctx, st.c, i, o.nodes, o.rolloutID) }); err != nil {
		return res, err
	}
	if err := waitCount(ctx, out, "provisioned", st.rec.ready[phase(v1, "")], int64(o.tenants*o.nodes)); err != nil {
		return res, err
	}

	// changes[i] is how many changes tenant i has had.
	changes := make([]int, o.tenants)
	var sampler sync.WaitGroup
	stopSampling := make(chan struct{})
	sampler.Go(func() {
		begin := time.Now()
		last, _ := writes(st.metricsURL)
		lastRollouts := 0
		tick := time.NewTicker(so.every)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			s, now, err := sample(ctx, st, apiserver)
			if err != nil {
				fmt.Fprintln(out, "  sample:", err)
				continue
			}
			s.At = time.Since(begin)
			rollouts := st.rec.rolloutsDone(v1)
			s.Rollouts, lastRollouts = rollouts-lastRollouts, rollouts
			for k, v := range now {
				d := v - last[k]
				switch {
				case strings.HasPrefix(k, breakdownPrefix), strings.HasPrefix(k, stepSum), strings.HasPrefix(k, stepCount), k == eventsDropped, k == eventWriteFailures:
				case k == "create events":
					s.Events += d
					s.Writes += d
				default:
					s.Writes += d
				}
				if strings.HasPrefix(k, conditionPrefix) {
					s.Conditions += d
				}
			}
			last = now
			res.Samples = append(res.Samples, s)
			fmt.Fprintf(out, "  %5.1f min: RSS %.1f MiB, %d goroutines, %d watches, %d rollouts, %d writes\n", s.At.Minutes(), s.RSSMiB, s.Goroutines, s.Watches, s.Rollouts, s.Writes)
		}
	})
	fmt.Fprintf(out, "Changing %g tenants/s for %s…\n", o.rate, so.duration)
	pace := time.NewTicker(time.Duration(float64(time.Second) / o.rate))
	end := time.After(so.duration)
	for k := 0; ; k++ {
		select {
		case <-end:
		case <-ctx.Done():
			return res, ctx.Err()
		case <-pace.C:
			i := k % o.tenants
			if changes[i] > 0 && st.rec.readyCount(namespace(i), phase(soakVersion(changes[i]), "")) < o.nodes {
				res.Skipped++
				continue
			}
			changes[i]++
			res.Changes++
			if err := changeTenant(ctx, st.c, i, o, soakVersion(changes[i])); err != nil {
				return res, err
			}
			continue
		}
		break
	}
	pace.Stop()
	fmt.Fprintln(out, "Waiting for the last changes to roll out…")
	for i, n := range changes {
		for n > 0 && st.rec.readyCount(namespace(i), phase(soakVersion(n), "")) < o.nodes {
			select {
			case <-ctx.Done():
				return res, fmt.Errorf("tenant %s did not finish rolling %s", namespace(i), soakVersion(n))
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	close(stopSampling)
	sampler.Wait()

	settle, stopSettle := context.WithTimeout(ctx, 2*time.Minute)
	before, err := settledWrites(settle, st.metricsURL)
	stopSettle()
	if err != nil {
		return res, fmt.Errorf("the sequencer's writes did not stop for a second within 2 minutes of the last change settling (a write loop?): %w", err)
	}
	fmt.Fprintf(out, "Watching the settled fleet for %s…\n", so.quiet)
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(so.quiet):
	}
	after, err := writes(st.metricsURL)
	if err != nil {
		return res, err
	}
	res.QuietWrites = map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d != 0 && !strings.HasPrefix(k, stepSum) && !strings.HasPrefix(k, stepCount) {
			res.QuietWrites[k] = d
		}
	}
	if len(res.QuietWrites) == 0 {
		res.QuietWrites = nil
	}
	res.OutOfOrder = st.rec.soakOrder(o, changes)
	res.Violations = -1
	if !o.noAudit {
		if err := awaitJudged(st.metricsURL, time.Minute); err != nil {
			return res, err
		}
		v, err := metricSum(st.metricsURL, auditmetrics.Violations)
		if err != nil {
			return res, err
		}
		res.Violations = int(v)
	}
	return res, nil
}

// sumOf adds f over the samples.
func sumOf(samples []soakSample, f func(soakSample) int) int {
	n := 0
	for _, s := range samples {
		n += f(s)
	}
	return n
}

// changeTenant changes every node of tenant i to version, with a new
// rollout-id, as one render of the tenant chart.
func changeTenant(ctx context.Context, c client.Client, i int, o options, version string) error {
	return updateNodes(ctx, c, i, o.nodes, func(n v2alpha1.Node) {
		n.NodeSpec().ExpressVersion = version
		if o.rolloutID {
			annotate(n, v2alpha1.AnnotationRolloutID, version)
		}
	})
}

// sample reads the sequencer's RSS and goroutines, kube-apiserver's open
// watches, and the sequencer's write counters.
func sample(ctx context.Context, st *stack, apiserver kubernetes.Interface) (soakSample, map[string]int, error) {
	var s soakSample
	rss, err := procStatus(st.seq.Process.Pid, "VmRSS:")
	if err != nil {
		return s, nil, err
	}
	s.RSSMiB = float64(rss) / 1024
	goroutines, err := metricSum(st.metricsURL, "go_goroutines")
	if err != nil {
		return s, nil, err
	}
	s.Goroutines = int(goroutines)
	metrics, err := apiserver.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return s, nil, fmt.Errorf("reading kube-apiserver's metrics: %w", err)
	}
	families, err := parseMetrics(bytes.NewReader(metrics))
	if err != nil {
		return s, nil, fmt.Errorf("kube-apiserver's metrics: %w", err)
	}
	watches, _ := sum(families, "apiserver_longrunning_requests", func(m *dto.Metric) bool { return label(m, "verb") == "WATCH" })
	s.Watches = int(watches)
	now, err := writes(st.metricsURL)
	return s, now, err
}

// procStatus reads a field of /proc/<pid>/status in KiB.
func procStatus(pid int, field string) (int, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("reading the sequencer's status: %w", err)
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, field); ok {
			return strconv.Atoi(strings.Fields(v)[0])
		}
	}
	return 0, fmt.Errorf("no %s in /proc status", field)
}

// rolloutsDone counts the nodes Ready on a version other than the first:
// the node rollouts of the changes.
func (r *recorder) rolloutsDone(first string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for ph, nodes := range r.readyOn {
		if ph != phase(first, "") {
			n += len(nodes)
		}
	}
	return n
}

// soakOrder checks every change of a soak: its nodes started rolling in
// the upgrade order, each only after the one before it was Ready on that
// version (the simulated operator's record, not the sequencer's).
func (r *recorder) soakOrder(o options, changes []int) []string {
	order := defaults.Builtin().Upgrade.Sequence(keys(o.nodes))
	var want []string
	for _, k := range order {
		want = append(want, "t-"+k.String())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var bad []string
	for i, n := range changes {
		ns := namespace(i)
		byVersion := map[string][]string{}
		startAt := map[string]time.Time{}
		for _, s := range r.starts[ns] {
			byVersion[s.Version] = append(byVersion[s.Version], s.Node)
			startAt[s.Node+"/"+s.Version] = s.At
		}
		for c := 1; c <= n; c++ {
			v := soakVersion(c)
			if got := byVersion[v]; !slices.Equal(got, want) {
				bad = append(bad, fmt.Sprintf("%s %s: started %v", ns, v, got))
				continue
			}
			for j := 1; j < len(want); j++ {
				ready, started := r.readyAt[ns+"/"+want[j-1]+"/"+phase(v, "")], startAt[want[j]+"/"+v]
				if ready.IsZero() || started.Before(ready) {
					bad = append(bad, fmt.Sprintf("%s %s: %s started at %s, %s Ready at %s", ns, v, want[j], started.Format(time.StampMilli), want[j-1], ready.Format(time.StampMilli)))
				}
			}
		}
	}
	return bad
}
