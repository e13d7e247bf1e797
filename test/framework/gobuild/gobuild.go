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

// Binary builds the command in dir (relative to the repository's root) into
// a new temporary directory and returns the binary's path, named name.
func Binary(dir, name string) (string, error) {
	tmp, err := os.MkdirTemp("", name+"-")
	if err != nil {
		return "", err
	}
	path := filepath.Join(tmp, name)
	build := exec.Command("go", "build", "-o", path, ".")
	build.Dir = filepath.Join(controlplane.Root(), dir)
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %v\n%s", name, err, out)
	}
	return path, nil
}
