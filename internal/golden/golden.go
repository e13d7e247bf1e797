// Package golden compares what a test produced with a file in the test's
// testdata/ directory; `go test <package> -update` rewrites the files.
package golden

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// Assert compares got with testdata/<name>.golden (spaces in name become
// underscores), writing the file first when -update is given.
func Assert(t testing.TB, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", strings.ReplaceAll(name, " ", "_")+".golden")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run `go test` on this package with -update to write %s", path)
	assert.Equal(t, string(want), got, "output differs from %s", path)
}
