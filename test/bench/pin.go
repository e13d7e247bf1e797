package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
)

// With -pin the benchmark gives kube-apiserver and etcd (and, with -cluster,
// the control loops) the first core and express-sequencer and the driver
// the second, so that what the sequencer costs kube-apiserver shows apart
// from what it costs itself. Every thread of each process is pinned
// (taskset -a); threads created later inherit it.

const (
	// apiServerCores run kube-apiserver, etcd and every other process the
	// benchmark started but express-sequencer.
	apiServerCores = "0"
	// sequencerCores run express-sequencer and the benchmark's driver.
	sequencerCores = "1"
)

// pinStack pins the benchmark's child processes but sequencer (its pid) to
// apiServerCores, and the benchmark itself and sequencer to
// sequencerCores.
func pinStack(sequencer int) error {
	children, err := childrenOf(os.Getpid())
	if err != nil {
		return err
	}
	for _, pid := range children {
		cores := apiServerCores
		if pid == sequencer {
			cores = sequencerCores
		}
		if err := pin(pid, cores); err != nil {
			return err
		}
	}
	return pin(os.Getpid(), sequencerCores)
}

// pin sets the CPU affinity of every thread of process pid to cores.
func pin(pid int, cores string) error {
	if out, err := exec.Command("taskset", "-a", "-p", "-c", cores, strconv.Itoa(pid)).CombinedOutput(); err != nil {
		return fmt.Errorf("pinning process %d to cores %s: %v: %s", pid, cores, err, out)
	}
	return nil
}

// childrenOf returns the processes whose parent is pid.
func childrenOf(pid int) ([]int, error) {
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range stats {
		data, err := os.ReadFile(f)
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid …: comm may hold spaces and parentheses.
		rest := string(data[strings.LastIndexByte(string(data), ')')+1:])
		fields := strings.Fields(rest)
		if len(fields) < 2 {
			continue
		}
		if ppid, err := strconv.Atoi(fields[1]); err == nil && ppid == pid {
			child, _ := strconv.Atoi(filepath.Base(filepath.Dir(f)))
			out = append(out, child)
		}
	}
	return out, nil
}
