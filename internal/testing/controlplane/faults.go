package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
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
	pid, _, err := process("etcd", "--listen-client-urls", etcd.URL.Host)
	return pid, err
}

// process finds, among the machine's processes, the one running binary name
// with an argument flag (--flag=… or --flag …) that lists a URL whose host
// is host, and returns its pid and command line.
func process(name, flag, host string) (int, []string, error) {
	cmdlines, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, nil, err
	}
	for _, path := range cmdlines {
		cmdline, err := os.ReadFile(path)
		if err != nil {
			continue // gone meanwhile
		}
		raw := bytes.Split(bytes.TrimRight(cmdline, "\x00"), []byte{0})
		if len(raw) == 0 || filepath.Base(string(raw[0])) != name {
			continue
		}
		args := make([]string, len(raw))
		for i, a := range raw {
			args[i] = string(a)
		}
		for i, arg := range args[1:] {
			value, ok := strings.CutPrefix(arg, flag+"=")
			if !ok && arg == flag && i+2 < len(args) {
				value, ok = args[i+2], true
			}
			if ok && slices.ContainsFunc(strings.Split(value, ","), func(raw string) bool {
				u, err := url.Parse(raw)
				return err == nil && u.Host == host
			}) {
				pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path)))
				return pid, args, err
			}
		}
	}
	return 0, nil, fmt.Errorf("no %s process with %s naming %s", name, flag, host)
}
