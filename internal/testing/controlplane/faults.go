package controlplane

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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

// MoveEtcdRevision writes a key of no API resource straight to etcd
// (through its JSON gateway), as a write through another kube-apiserver
// does: etcd's revision moves on, so a kube-apiserver started after it
// fills its watch cache from a later revision, and every watch resumed
// from an earlier one is told 410 Gone — its informer lists again.
func (cp *ControlPlane) MoveEtcdRevision(ctx context.Context) error {
	etcd := cp.Env.ControlPlane.Etcd
	if etcd == nil || etcd.URL == nil {
		return errors.New("the control plane has no etcd running")
	}
	body, err := json.Marshal(map[string]string{
		"key":   base64.StdEncoding.EncodeToString([]byte("/express-sequencer-test/revision")),
		"value": base64.StdEncoding.EncodeToString([]byte(time.Now().String())),
	})
	if err != nil {
		return err
	}
	u := url.URL{Scheme: etcd.URL.Scheme, Host: etcd.URL.Host, Path: "/v3/kv/put"}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("writing to etcd: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		out, _ := io.ReadAll(resp.Body)
		return fmt.Errorf("writing to etcd: %s: %s", resp.Status, out)
	}
	return nil
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

// StopAPIServer kills kube-apiserver (SIGKILL, as a crash or the OOM killer
// does: nothing drains; a SIGTERM waits up to its request timeout, a
// minute, for requests in flight), etcd kept: until start, every client's
// connection is refused.
// start runs it again with the same command line — the same port,
// certificates and etcd — and waits until it is ready; Stop stops that
// process too.
func (cp *ControlPlane) StopAPIServer() (start func() error, err error) {
	etcd := cp.Env.ControlPlane.Etcd
	if etcd == nil || etcd.URL == nil {
		return nil, errors.New("the control plane has no etcd running")
	}
	pid, args, err := process("kube-apiserver", "--etcd-servers", etcd.URL.Host)
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("killing kube-apiserver (pid %d): %w", pid, err)
	}
	deadline := time.Now().Add(time.Minute)
	for !gone(pid) {
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("kube-apiserver (pid %d) still runs a minute after SIGKILL", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return func() error {
		logs, err := os.CreateTemp("", "kube-apiserver-restarted-*.log")
		if err != nil {
			return err
		}
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout, cmd.Stderr = logs, logs
		if err := cmd.Start(); err != nil {
			return errors.Join(fmt.Errorf("starting kube-apiserver again: %w", err), logs.Close(), os.Remove(logs.Name()))
		}
		cp.restarted = append(cp.restarted, restartedAPIServer{cmd: cmd, logs: logs})
		return cp.waitReady(time.Minute)
	}, nil
}

// gone reports whether process pid has exited (and been reaped, or is a
// zombie).
func gone(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(fields) > 0 && fields[0] == "Z"
}

// waitReady waits until the API server answers /readyz.
func (cp *ControlPlane) waitReady(timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		cancel()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("kube-apiserver not ready within %s of its start: %w", timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
