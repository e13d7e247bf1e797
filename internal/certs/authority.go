package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// KeyPair is a certificate with its private key, both PEM encoded.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte
}

// Certificate parses the pair's certificate.
func (kp KeyPair) Certificate() (*x509.Certificate, error) {
	block, _ := pem.Decode(kp.CertPEM)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, errors.New("no PEM certificate found")
	}
	return x509.ParseCertificate(block.Bytes)
}

func (kp KeyPair) privateKey() (*ecdsa.PrivateKey, error) {
	block, _ := pem.Decode(kp.KeyPEM)
	if block == nil {
		return nil, errors.New("no PEM private key found")
	}
	return x509.ParseECPrivateKey(block.Bytes)
}

// NewCA creates a self-signed certificate authority valid from now for the
// given duration.
func NewCA(now time.Time, validity time.Duration) (KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "express-sequencer-webhook-ca"},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, nil)
}

// NewServingCert creates a serving certificate for the given DNS names and IP
// addresses, signed by ca, valid from now for the given duration (but never
// past the CA).
func NewServingCert(ca KeyPair, hosts []string, now time.Time, validity time.Duration) (KeyPair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "express-sequencer-webhook"},
		NotBefore:   now.Add(-time.Minute),
		NotAfter:    now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return sign(tmpl, &ca)
}

func sign(tmpl *x509.Certificate, ca *KeyPair) (KeyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return KeyPair{}, fmt.Errorf("generating key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return KeyPair{}, fmt.Errorf("generating serial number: %w", err)
	}
	tmpl.SerialNumber = serial
	parent, signer := tmpl, key
	if ca != nil {
		if parent, err = ca.Certificate(); err != nil {
			return KeyPair{}, fmt.Errorf("reading CA certificate: %w", err)
		}
		if signer, err = ca.privateKey(); err != nil {
			return KeyPair{}, fmt.Errorf("reading CA key: %w", err)
		}
		if tmpl.NotAfter.After(parent.NotAfter) {
			tmpl.NotAfter = parent.NotAfter
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, signer)
	if err != nil {
		return KeyPair{}, fmt.Errorf("signing certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return KeyPair{}, fmt.Errorf("encoding key: %w", err)
	}
	return KeyPair{
		CertPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		KeyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}
