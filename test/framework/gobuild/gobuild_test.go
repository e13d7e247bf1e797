package gobuild

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/medallia/express-sequencer/internal/testing/controlplane"
)

func TestABuiltCommandIsKeptInBinTestAndNothingElseIsLeftBehind(t *testing.T) {
	tmpBefore, err := os.ReadDir(os.TempDir())
	require.NoError(t, err)
	path, err := Binary(filepath.Join("cmd", "kubectl-express"), "kubectl-express")
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(controlplane.Root(), "bin", "test", "kubectl-express"), path)
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.NotZero(t, info.Mode()&0o111, "the binary is executable")

	entries, err := os.ReadDir(filepath.Dir(path))
	require.NoError(t, err)
	for _, e := range entries {
		// Another package's build of the command may be under way.
		assert.False(t, strings.HasPrefix(e.Name(), buildDirPrefix("kubectl-express")), "the build's own directory %s is left in bin/test", e.Name())
	}
	tmpAfter, err := os.ReadDir(os.TempDir())
	require.NoError(t, err)
	for _, e := range tmpAfter {
		if strings.HasPrefix(e.Name(), "kubectl-express-") {
			assert.Contains(t, names(tmpBefore), e.Name(), "the build left %s in %s", e.Name(), os.TempDir())
		}
	}
}

func names(entries []os.DirEntry) []string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Name()
	}
	return out
}
