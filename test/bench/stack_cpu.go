package main

import (
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// stackCPU reads the CPU time of each process the benchmark started, by
// the name of its executable (comm, in /proc, keeps 15 characters:
// kube-controller-manager's would be cut), adding up processes of one
// name, and the sequencer's (its pid) as express-sequencer, whatever its
// binary is called: what kube-apiserver above all, whose cost the
// sequencer's reads and writes drive, and the rest of the stack spent
// beside express-sequencer, read over one window.
func stackCPU(sequencer int) (map[string]time.Duration, error) {
	children, err := childrenOf(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("finding the processes the benchmark started: %w", err)
	}
	out := map[string]time.Duration{}
	for _, pid := range children {
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			continue // gone meanwhile: a process the run has finished with
		}
		cpu, err := cpuTime(pid)
		if err != nil {
			continue
		}
		name := filepath.Base(exe)
		if pid == sequencer {
			name = sequencerProcess
		}
		out[name] += cpu
	}
	for _, name := range []string{"kube-apiserver", sequencerProcess} {
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("no %s among the benchmark's processes %v", name, children)
		}
	}
	return out, nil
}

// sequencerProcess names express-sequencer's process in stackCPU.
const sequencerProcess = "express-sequencer"

// reportStackCPU prints kube-apiserver's CPU time and the sequencer's,
// each per node rollout of both phases, then each other process's.
func reportStackCPU(out io.Writer, cpu map[string]time.Duration, rollouts int) {
	perRollout := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(max(1, rollouts)) }
	api, seq := cpu["kube-apiserver"], cpu[sequencerProcess]
	fmt.Fprintf(out, "  over provisioning and upgrade alone: kube-apiserver CPU time %s, %.1f ms per node rollout (every client's calls, not the sequencer's alone); express-sequencer %s, %.1f ms", api.Round(time.Second), perRollout(api), seq.Round(time.Second), perRollout(seq))
	for _, name := range slices.Sorted(maps.Keys(cpu)) {
		if name != "kube-apiserver" && name != sequencerProcess {
			fmt.Fprintf(out, "; %s %s", name, cpu[name].Round(time.Second))
		}
	}
	fmt.Fprintln(out)
}
