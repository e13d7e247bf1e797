package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// StallEtcd stops etcd's process (SIGSTOP), as a disk that stops answering
// or a process frozen by the kernel does: every read and write of the API
// server that reaches etcd waits. resume continues it (SIGCONT).
func (cp *ControlPlane) StallEtcd() (resume func() error, err error) {
	pid, err := cp.etcdPID()
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		return nil, fmt.Errorf("stopping etcd (pid %d): %w", pid, err)
	}
	return func() error { return syscall.Kill(pid, syscall.SIGCONT) }, nil
}

// etcdPID finds the control plane's etcd among the machine's processes by
// its client URL (envtest starts it with --listen-client-urls).
func (cp *ControlPlane) etcdPID() (int, error) {
	etcd := cp.Env.ControlPlane.Etcd
	if etcd == nil || etcd.URL == nil {
		return 0, errors.New("the control plane has no etcd running")
	}
	want := []byte(etcd.URL.Host)
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, err
	}
	for _, path := range cmdlines {
		cmdline, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		args := bytes.Split(cmdline, []byte{0})
		if len(args) == 0 || filepath.Base(string(args[0])) != "etcd" {
			continue
		}
		for _, arg := range args[1:] {
			if bytes.HasPrefix(arg, []byte("--listen-client-urls")) && bytes.Contains(arg, want) {
				return strconv.Atoi(filepath.Base(filepath.Dir(path)))
			}
		}
	}
	return 0, fmt.Errorf("no etcd process listening on %s", etcd.URL.Host)
}
