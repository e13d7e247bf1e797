// Package gobuild builds a command of this repository for a test to run, as
// users build it: `go build` in its own directory (and so its own module,
// where it has one).
package gobuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// Binary builds the command in dir (relative to the repository's root) and
// returns the binary's path: bin/test/name under the repository's root,
// replaced by each build (Go's build cache makes a build of unchanged code
// a link), so that test runs leave no binary behind them. The build is
// written beside it and renamed into place: packages testing in parallel
// that build the same command each find a whole binary.
func Binary(dir, name string) (string, error) {
	dest := filepath.Join(controlplane.Root(), "bin", "test")
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dest, buildDirPrefix(name))
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	built := filepath.Join(tmp, name)
	build := exec.Command("go", "build", "-o", built, ".")
	build.Dir = filepath.Join(controlplane.Root(), dir)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", name, err, out)
	}
	path := filepath.Join(dest, name)
	if err := os.Rename(built, path); err != nil {
		return "", fmt.Errorf("moving %s into place: %w", name, err)
	}
	return path, nil
}

// buildDirPrefix names the directory a build of name by this process is
// written in, beside bin/test/name.
func buildDirPrefix(name string) string { return fmt.Sprintf("%s-%d-", name, os.Getpid()) }
