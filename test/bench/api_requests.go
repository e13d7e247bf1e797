package main

import (
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
)

// requestsMetric is express-sequencer's count of its requests to the API
// server by caller, verb and resource.
const requestsMetric = "express_sequencer_api_requests_total"

// requests reads express-sequencer's requests to the API server, keyed
// "caller verb resource".
func requests(url string) (map[string]int, error) {
	families, err := scrape(url)
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, m := range families[requestsMetric].GetMetric() {
		out[label(m, "caller")+" "+label(m, "verb")+" "+label(m, "resource")] += int(value(m))
	}
	return out, nil
}

// requestsSince is what was requested between before and after, by key;
// keys of no request left out.
func requestsSince(before, after map[string]int) map[string]int {
	out := map[string]int{}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// reportRequests prints the requests of provisioning and upgrade per node
// rollout: by caller, then each caller's by verb and resource, most first
// (those under 0.05 per node rollout summed as "the rest").
func reportRequests(out io.Writer, requests map[string]int, rollouts int) {
	if len(requests) == 0 {
		return
	}
	per := func(n int) float64 { return float64(n) / float64(rollouts) }
	byCaller := map[string]int{}
	total := 0
	for k, v := range requests {
		byCaller[strings.SplitN(k, " ", 2)[0]] += v
		total += v
	}
	callers := sortedByCount(byCaller)
	fmt.Fprintf(out, "  sequencer API calls over provisioning and upgrade: %d, %.1f per node rollout, by caller:\n", total, per(total))
	for _, caller := range callers {
		fmt.Fprintf(out, "    %-14s %7d  %5.1f per node rollout:", caller, byCaller[caller], per(byCaller[caller]))
		mine := map[string]int{}
		for k, v := range requests {
			if c, kind, _ := strings.Cut(k, " "); c == caller {
				mine[kind] = v
			}
		}
		rest := 0
		for _, kind := range sortedByCount(mine) {
			if per(mine[kind]) < 0.05 {
				rest += mine[kind]
				continue
			}
			fmt.Fprintf(out, " %s %.1f;", kind, per(mine[kind]))
		}
		if rest > 0 {
			fmt.Fprintf(out, " the rest %.2f;", per(rest))
		}
		fmt.Fprintln(out)
	}
}

// sortedByCount returns counts' keys, the largest count first.
func sortedByCount(counts map[string]int) []string {
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		return cmp.Or(cmp.Compare(counts[b], counts[a]), strings.Compare(a, b))
	})
	return keys
}
