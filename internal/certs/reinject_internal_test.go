package certs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A bundle is replaced only when it would not trust this replica's CA: one
// that also holds a CA another replica renewed to is left alone, so two
// replicas between a renewal and its sync do not take turns rewriting it.
func TestABundleIsTrustedWhenItHoldsThisReplicasCA(t *testing.T) {
	dir := t.TempDir()
	ours, err := NewCA(time.Now(), time.Hour)
	require.NoError(t, err)
	newer, err := NewCA(time.Now(), time.Hour)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, CAFile), ours.CertPEM, 0o600))
	r := &Rotator{Dir: dir}
	assert.True(t, r.trusted([][]byte{ours.CertPEM}), "exactly our bundle")
	assert.True(t, r.trusted([][]byte{append(append([]byte{}, newer.CertPEM...), ours.CertPEM...)}), "a renewed CA plus ours")
	assert.False(t, r.trusted([][]byte{newer.CertPEM}), "a bundle without our CA")
	assert.False(t, r.trusted([][]byte{ours.CertPEM, nil}), "one webhook without a bundle")
}
