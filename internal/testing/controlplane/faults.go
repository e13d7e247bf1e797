package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
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

// RestartAPIServer stops kube-apiserver (SIGTERM, as a rolling restart of a
// control-plane node does) and starts it again with the same command line —
// the same port, certificates and etcd, which keeps every object — and
// returns once it answers /readyz. Every client's requests fail meanwhile
// and its watches end; they must reconnect by themselves.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	pid, args, err := process("kube-apiserver", "--etcd-servers", cp.Env.ControlPlane.Etcd.URL.Host)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping kube-apiserver (pid %d): %w", pid, err)
	}
	for {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); os.IsNotExist(err) {
			break
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for kube-apiserver (pid %d) to stop: %w", pid, err)
		}
	}
	log, err := os.CreateTemp("", "kube-apiserver-restarted-*.log")
	if err != nil {
		return err
	}
	cmd := exec.Command(args[0], args[1:]...) //nolint:gosec // the command line it ran with
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting kube-apiserver again: %w", err)
	}
	cp.restarted = append(cp.restarted, cmd)
	cp.restartLogs = append(cp.restartLogs, log.Name())
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	for {
		if body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err == nil && string(body) == "ok" {
			return nil
		}
		if err := sleep(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for the restarted kube-apiserver (log %s): %w", log.Name(), err)
		}
	}
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
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
