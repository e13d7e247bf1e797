package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sync/errgroup"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// saveCPUProfiles profiles the sequencer (its pprof endpoint at sequencer)
// and kube-apiserver (its /debug/pprof, through the admin config) over the
// same seconds, and writes sequencer.pprof and kube-apiserver.pprof into
// dir.
func saveCPUProfiles(ctx context.Context, dir string, seconds int, sequencer string, admin *rest.Config) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	var g errgroup.Group
	g.Go(func() error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", sequencer, seconds), nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return fmt.Errorf("profiling the sequencer: %w", err)
		}
		defer resp.Body.Close()
		return writeFile(filepath.Join(dir, "sequencer.pprof"), resp.Body)
	})
	g.Go(func() error {
		raw, err := cs.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").
			Param("seconds", strconv.Itoa(seconds)).Timeout(0).DoRaw(ctx)
		if err != nil {
			return fmt.Errorf("profiling kube-apiserver: %w", err)
		}
		return os.WriteFile(filepath.Join(dir, "kube-apiserver.pprof"), raw, 0o644)
	})
	return g.Wait()
}

func writeFile(file string, r io.Reader) error {
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, r); err != nil {
		_ = f.Close()
		return fmt.Errorf("writing %s: %w", file, err)
	}
	return f.Close()
}
