// Package mermaid checks Mermaid diagrams with Mermaid's own parser (the
// mermaid npm package, run by Node.js from hack/mermaid-check, which make
// test installs).
package mermaid

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

// Check parses every diagram in files — a diagram per file, or every
// ```mermaid block of a Markdown file — and returns what the parser said,
// with an error naming each diagram Mermaid refuses.
func Check(files ...string) (string, error) {
	dir := filepath.Join(controlplane.Root(), "hack", "mermaid-check")
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "mermaid")); err != nil {
		return "", fmt.Errorf("Mermaid's parser is not installed: run `make test`, or `npm ci` in %s", dir)
	}
	out, err := exec.Command("node", append([]string{filepath.Join(dir, "check.mjs")}, files...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%w: %s", err, out)
	}
	return string(out), nil
}

// CheckText parses one diagram given as text.
func CheckText(dir, text string) (string, error) {
	path := filepath.Join(dir, "diagram.mmd")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return "", err
	}
	return Check(path)
}
