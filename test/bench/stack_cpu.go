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

// stackCPU reads the CPU time of each process the benchmark started but
// sequencer (its pid), by the name of its executable (comm, in /proc,
// keeps 15 characters: kube-controller-manager's would be cut), adding up
// processes of one name:
// what the rest of the stack spent beside express-sequencer, kube-apiserver
// above all, whose cost the sequencer's reads and writes drive.
func stackCPU(sequencer int) (map[string]time.Duration, error) {
	children, err := childrenOf(os.Getpid())
	if err != nil {
		return nil, fmt.Errorf("finding the processes the benchmark started: %w", err)
	}
	out := map[string]time.Duration{}
	for _, pid := range children {
		if pid == sequencer {
			continue
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			continue // gone meanwhile: a process the run has finished with
		}
		cpu, err := cpuTime(pid)
		if err != nil {
			continue
		}
		out[filepath.Base(exe)] += cpu
	}
	if _, ok := out["kube-apiserver"]; !ok {
		return nil, fmt.Errorf("no kube-apiserver among the benchmark's processes %v", children)
	}
	return out, nil
}

// reportStackCPU prints kube-apiserver's CPU time, and each other
// process's, beside the node rollouts of both phases.
func reportStackCPU(out io.Writer, cpu map[string]time.Duration, rollouts int) {
	api := cpu["kube-apiserver"]
	fmt.Fprintf(out, "  kube-apiserver CPU time: %s, %.1f ms per node rollout (provisioning and upgrade; every client's calls, not the sequencer's alone)", api.Round(time.Second), float64(api.Microseconds())/1000/float64(max(1, rollouts)))
	for _, name := range slices.Sorted(maps.Keys(cpu)) {
		if name != "kube-apiserver" {
			fmt.Fprintf(out, "; %s %s", name, cpu[name].Round(time.Second))
		}
	}
	fmt.Fprintln(out)
}
