package certs_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/medallia/express-sequencer/internal/certs"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func rotator(dir string, clock *clocktesting.FakeClock) *certs.Rotator {
	return &certs.Rotator{
		Dir: dir, Hosts: []string{"127.0.0.1", "express-sequencer-webhook-service.express-sequencer-system.svc"},
		CAValidity: 90 * 24 * time.Hour, CertValidity: 30 * 24 * time.Hour, CheckInterval: time.Hour,
		Clock: clock, Log: logr.Discard(),
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	c, err := certs.KeyPair{CertPEM: data}.Certificate()
	require.NoError(t, err)
	return c
}

func countCerts(bundle []byte) int {
	n := 0
	for block, rest := pem.Decode(bundle); block != nil; block, rest = pem.Decode(rest) {
		n++
	}
	return n
}

func TestEnsureCreatesACAAndAServingCertificateForTheHosts(t *testing.T) {
	dir := t.TempDir()
	r := rotator(dir, clocktesting.NewFakeClock(epoch))
	renewed, err := r.Ensure(context.Background())
	require.NoError(t, err)
	assert.True(t, renewed)

	ca := readCert(t, filepath.Join(dir, certs.CAFile))
	leaf := readCert(t, filepath.Join(dir, certs.CertFile))
	assert.True(t, ca.IsCA)
	require.NoError(t, leaf.CheckSignatureFrom(ca))
	assert.Equal(t, []string{"express-sequencer-webhook-service.express-sequencer-system.svc"}, leaf.DNSNames)
	assert.Equal(t, "127.0.0.1", leaf.IPAddresses[0].String())
	assert.Equal(t, epoch.Add(30*24*time.Hour), leaf.NotAfter)

	info, err := os.Stat(filepath.Join(dir, certs.KeyFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm(), "the key is readable by its owner only")
}

func TestEnsureRenewsOnlyWhenAThirdOfTheValidityIsLeft(t *testing.T) {
	dir := t.TempDir()
	clock := clocktesting.NewFakeClock(epoch)
	r := rotator(dir, clock)
	_, err := r.Ensure(context.Background())
	require.NoError(t, err)
	first := readCert(t, filepath.Join(dir, certs.CertFile))

	clock.SetTime(epoch.Add(19 * 24 * time.Hour)) // 11 of 30 days left
	renewed, err := r.Ensure(context.Background())
	require.NoError(t, err)
	assert.False(t, renewed, "more than a third left: nothing to do")

	clock.SetTime(epoch.Add(21 * 24 * time.Hour)) // 9 of 30 days left
	renewed, err = r.Ensure(context.Background())
	require.NoError(t, err)
	assert.True(t, renewed)
	second := readCert(t, filepath.Join(dir, certs.CertFile))
	assert.NotEqual(t, first.SerialNumber, second.SerialNumber)
	assert.Equal(t, readCert(t, filepath.Join(dir, certs.CAFile)).SerialNumber, readCert(t, filepath.Join(dir, certs.CAFile)).SerialNumber)
}

func TestARenewedCAIsTrustedAlongsideThePreviousOne(t *testing.T) {
	dir := t.TempDir()
	clock := clocktesting.NewFakeClock(epoch)
	r := rotator(dir, clock)
	_, err := r.Ensure(context.Background())
	require.NoError(t, err)
	oldCA := readCert(t, filepath.Join(dir, certs.CAFile))
	bundle, err := r.Bundle()
	require.NoError(t, err)
	assert.Equal(t, 1, countCerts(bundle))

	clock.SetTime(epoch.Add(61 * 24 * time.Hour)) // 29 of 90 CA days left
	_, err = r.Ensure(context.Background())
	require.NoError(t, err)
	newCA := readCert(t, filepath.Join(dir, certs.CAFile))
	assert.NotEqual(t, oldCA.SerialNumber, newCA.SerialNumber)
	require.NoError(t, readCert(t, filepath.Join(dir, certs.CertFile)).CheckSignatureFrom(newCA), "the serving certificate is reissued by the new CA")

	bundle, err = r.Bundle()
	require.NoError(t, err)
	assert.Equal(t, 2, countCerts(bundle), "the old CA stays trusted until it expires")

	clock.SetTime(epoch.Add(91 * 24 * time.Hour))
	bundle, err = r.Bundle()
	require.NoError(t, err)
	assert.Equal(t, 1, countCerts(bundle), "an expired CA leaves the bundle")
}

func TestEnsureReplacesFilesThatDoNotFormAKeyPair(t *testing.T) {
	dir := t.TempDir()
	r := rotator(dir, clocktesting.NewFakeClock(epoch))
	_, err := r.Ensure(context.Background())
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, certs.KeyFile), []byte("garbage"), 0o600))
	renewed, err := r.Ensure(context.Background())
	require.NoError(t, err)
	assert.True(t, renewed)
	leaf := readCert(t, filepath.Join(dir, certs.CertFile))
	require.NoError(t, leaf.CheckSignatureFrom(readCert(t, filepath.Join(dir, certs.CAFile))))
}
