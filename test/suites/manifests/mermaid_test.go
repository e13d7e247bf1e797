package manifests

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/medallia/express-sequencer/internal/testing/controlplane"
	"github.com/medallia/express-sequencer/test/framework/mermaid"
)

// Every Mermaid diagram we ship or print parses with Mermaid's own parser:
// the docs' diagrams, and the goldens of kubectl express plan -o mermaid
// (a flowchart) and history -o mermaid (a Gantt chart).
func TestEveryMermaidDiagramParsesWithMermaidsOwnParser(t *testing.T) {
	root := controlplane.Root()
	files := []string{filepath.Join(root, "README.md")}
	for _, pattern := range []string{"docs/*.md", "cmd/kubectl-express/testdata/*mermaid*.golden"} {
		matches, err := filepath.Glob(filepath.Join(root, pattern))
		require.NoError(t, err)
		require.NotEmpty(t, matches, pattern)
		files = append(files, matches...)
	}
	out, err := mermaid.Check(files...)
	require.NoError(t, err)
	assert.Regexp(t, `^([6-9]|\d\d+) parsed, 0 refused`, out, "the docs' diagrams and the plugin's goldens")
}

// The check fails on what Mermaid refuses, naming the diagram.
func TestTheMermaidCheckRefusesWhatMermaidRefuses(t *testing.T) {
	for name, text := range map[string]string{
		"a task without dates":           "gantt\n    section acme-fe1\n    rolled :\n",
		"a state label a semicolon cuts": "stateDiagram-v2\n    Gated --> Released: requirements hold (or ignore-prerequisites); gate removed with released-target\n",
		"a flowchart edge to nowhere":    "flowchart LR\n    a --> \n    b -->|x\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := mermaid.CheckText(t.TempDir(), text)
			assert.ErrorContains(t, err, "Mermaid refuses it")
		})
	}
}
