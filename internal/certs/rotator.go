package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// File names in the cert directory. tls.crt and tls.key are what the webhook
// server (and a cert-manager Secret) use.
const (
	CAFile         = "ca.crt"
	CAKeyFile      = "ca.key"
	PreviousCAFile = "ca-previous.crt"
	CertFile       = "tls.crt"
	KeyFile        = "tls.key"
)

// Rotator keeps a self-signed CA and a serving certificate in Dir, and the
// CA bundle of the named webhook configurations in step with them. A
// certificate is renewed once less than a third of its validity is left; a
// renewed CA is trusted (bundle updated) before any certificate it signed is
// served, and the previous CA stays in the bundle until it expires.
type Rotator struct {
	// Dir is the cert directory the webhook server reads.
	Dir string
	// Hosts are the DNS names and IP addresses the serving certificate is for.
	Hosts []string
	// CAValidity and CertValidity are the lifetimes of new certificates.
	CAValidity, CertValidity time.Duration
	// CheckInterval is how often Start looks at expiry.
	CheckInterval time.Duration
	// Clock tells the time; a fake clock in tests.
	Clock clock.Clock
	// Client patches the CA bundle into the webhook configurations; nil
	// skips injection.
	Client client.Client
	// Watch, when set, watches the webhook configurations so that a bundle
	// removed or replaced (the configuration re-created) is injected again
	// at once.
	Watch client.WithWatch
	// CASecret, when set, names the Secret that holds the CA every replica
	// shares; without it the CA lives in Dir alone (one replica, local runs).
	CASecret *types.NamespacedName
	// MutatingConfigurations and ValidatingConfigurations are the names of
	// the webhook configurations to inject the CA bundle into.
	MutatingConfigurations, ValidatingConfigurations []string
	// Log receives a line for each renewal.
	Log logr.Logger
}

// Ensure creates or renews the CA and the serving certificate as needed and,
// when the CA changed, injects the new bundle before the new serving
// certificate is written. It reports whether anything was renewed.
func (r *Rotator) Ensure(ctx context.Context) (bool, error) {
	if err := os.MkdirAll(r.Dir, 0o700); err != nil {
		return false, fmt.Errorf("creating cert directory: %w", err)
	}
	now := r.Clock.Now()
	before, _ := os.ReadFile(filepath.Join(r.Dir, CAFile))
	var err error
	if r.CASecret != nil {
		err = r.syncSharedCA(ctx, now)
	} else {
		err = r.renewLocalCA(now)
	}
	if err != nil {
		return false, err
	}
	after, _ := os.ReadFile(filepath.Join(r.Dir, CAFile))
	caChanged := !bytes.Equal(before, after)
	if caChanged {
		// Trusted before anything it signed is served.
		if err := r.Inject(ctx); err != nil {
			return false, err
		}
	}
	ca, err := r.load(CAFile, CAKeyFile)
	if err != nil {
		return false, err
	}
	leaf, leafErr := r.load(CertFile, KeyFile)
	if !caChanged && leafErr == nil && !r.due(leaf, now, r.CertValidity) && signedBy(leaf, ca) {
		return false, nil
	}
	leaf, err = NewServingCert(ca, r.Hosts, now, r.CertValidity)
	if err != nil {
		return false, err
	}
	if err := r.write(leaf, CertFile, KeyFile); err != nil {
		return false, err
	}
	cert, _ := leaf.Certificate()
	r.Log.Info("Issued webhook serving certificate", "dir", r.Dir, "hosts", r.Hosts, "notAfter", cert.NotAfter)
	return true, nil
}

// renewLocalCA creates the CA in the cert directory, or renews it when due.
func (r *Rotator) renewLocalCA(now time.Time) error {
	ca, err := r.load(CAFile, CAKeyFile)
	if err == nil && !r.due(ca, now, r.CAValidity) {
		return nil
	}
	if err == nil {
		if err := writeFile(filepath.Join(r.Dir, PreviousCAFile), ca.CertPEM); err != nil {
			return err
		}
	}
	next, err := NewCA(now, r.CAValidity)
	if err != nil {
		return err
	}
	r.Log.Info("Created webhook CA", "dir", r.Dir, "validity", r.CAValidity)
	return r.write(next, CAFile, CAKeyFile)
}

// syncSharedCA keeps the CA in a Secret that every replica shares, so that
// the one bundle in the webhook configurations trusts all of them: the first
// replica creates it, a replica that finds it due renews it (optimistic
// concurrency: whoever loses takes the winner's), and every replica copies
// it into its cert directory and issues its own serving certificate from it.
func (r *Rotator) syncSharedCA(ctx context.Context, now time.Time) error {
	key := *r.CASecret
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, key, secret)
	switch {
	case apierrors.IsNotFound(err):
		ca, err := NewCA(now, r.CAValidity)
		if err != nil {
			return err
		}
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace},
			Data:       map[string][]byte{CAFile: ca.CertPEM, CAKeyFile: ca.KeyPEM},
		}
		if err := r.Client.Create(ctx, secret); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating the shared CA Secret %s: %w", key, err)
			}
			if err := r.Client.Get(ctx, key, secret); err != nil {
				return fmt.Errorf("reading the shared CA Secret %s: %w", key, err)
			}
		} else {
			r.Log.Info("Created the shared webhook CA", "secret", key.String(), "validity", r.CAValidity)
		}
	case err != nil:
		return fmt.Errorf("reading the shared CA Secret %s: %w", key, err)
	}
	ca := KeyPair{CertPEM: secret.Data[CAFile], KeyPEM: secret.Data[CAKeyFile]}
	if _, err := tls.X509KeyPair(ca.CertPEM, ca.KeyPEM); err != nil || r.due(ca, now, r.CAValidity) {
		next, err := NewCA(now, r.CAValidity)
		if err != nil {
			return err
		}
		renewed := secret.DeepCopy()
		renewed.Data = map[string][]byte{CAFile: next.CertPEM, CAKeyFile: next.KeyPEM, PreviousCAFile: ca.CertPEM}
		switch err := r.Client.Update(ctx, renewed); {
		case err == nil:
			r.Log.Info("Renewed the shared webhook CA", "secret", key.String())
			secret = renewed
		case apierrors.IsConflict(err): // another replica renewed it first
			if err := r.Client.Get(ctx, key, secret); err != nil {
				return fmt.Errorf("reading the shared CA Secret %s: %w", key, err)
			}
		default:
			return fmt.Errorf("renewing the shared CA Secret %s: %w", key, err)
		}
	}
	for _, name := range []string{CAFile, CAKeyFile, PreviousCAFile} {
		data, ok := secret.Data[name]
		if !ok {
			continue
		}
		if cur, err := os.ReadFile(filepath.Join(r.Dir, name)); err == nil && bytes.Equal(cur, data) {
			continue
		}
		if err := writeFile(filepath.Join(r.Dir, name), data); err != nil {
			return err
		}
	}
	return nil
}

// Bundle returns the PEM CA bundle clients must trust: the current CA and,
// until it expires, the previous one.
func (r *Rotator) Bundle() ([]byte, error) {
	current, err := os.ReadFile(filepath.Join(r.Dir, CAFile))
	if err != nil {
		return nil, fmt.Errorf("reading CA: %w", err)
	}
	bundle := bytes.Clone(current)
	if prev, err := os.ReadFile(filepath.Join(r.Dir, PreviousCAFile)); err == nil {
		if c, err := (KeyPair{CertPEM: prev}).Certificate(); err == nil && r.Clock.Now().Before(c.NotAfter) {
			bundle = append(bundle, prev...)
		}
	}
	return bundle, nil
}

// Inject writes the CA bundle into every webhook of the named configurations,
// retrying on conflicts. Configurations that do not exist are skipped: they
// get the bundle on the next renewal or restart.
func (r *Rotator) Inject(ctx context.Context) error {
	if r.Client == nil {
		return nil
	}
	bundle, err := r.Bundle()
	if err != nil {
		return err
	}
	for _, name := range r.MutatingConfigurations {
		err := r.patch(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{}, name, func(o client.Object) {
			cfg := o.(*admissionregistrationv1.MutatingWebhookConfiguration)
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].ClientConfig.CABundle = bundle
			}
		})
		if err != nil {
			return err
		}
	}
	for _, name := range r.ValidatingConfigurations {
		err := r.patch(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{}, name, func(o client.Object) {
			cfg := o.(*admissionregistrationv1.ValidatingWebhookConfiguration)
			for i := range cfg.Webhooks {
				cfg.Webhooks[i].ClientConfig.CABundle = bundle
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (r *Rotator) patch(ctx context.Context, obj client.Object, name string, set func(client.Object)) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := r.Client.Get(ctx, client.ObjectKey{Name: name}, obj); err != nil {
			return err
		}
		set(obj)
		return r.Client.Update(ctx, obj)
	})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("injecting CA bundle into %T %s: %w", obj, name, err)
	}
	if err == nil {
		r.Log.Info("Injected webhook CA bundle", "configuration", name)
	}
	return nil
}

// Start injects the CA bundle, then renews certificates as they near expiry
// until ctx ends. It runs on every replica (no leader election): each serves
// webhooks from its own cert directory.
func (r *Rotator) Start(ctx context.Context) error {
	if err := r.Inject(ctx); err != nil {
		return err
	}
	r.keepInjected(ctx)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-r.Clock.After(r.CheckInterval):
		}
		if _, err := r.Ensure(ctx); err != nil {
			r.Log.Error(err, "Renewing webhook certificates failed; retrying at the next check", "in", r.CheckInterval)
		}
	}
}

// NeedLeaderElection tells the manager to run the rotator on every replica.
func (r *Rotator) NeedLeaderElection() bool { return false }

// due reports whether less than a third of the validity is left.
func (r *Rotator) due(kp KeyPair, now time.Time, validity time.Duration) bool {
	c, err := kp.Certificate()
	return err != nil || c.NotAfter.Sub(now) < validity/3
}

func (r *Rotator) load(certName, keyName string) (KeyPair, error) {
	certPEM, err := os.ReadFile(filepath.Join(r.Dir, certName))
	if err != nil {
		return KeyPair{}, err
	}
	keyPEM, err := os.ReadFile(filepath.Join(r.Dir, keyName))
	if err != nil {
		return KeyPair{}, err
	}
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return KeyPair{}, fmt.Errorf("%s and %s do not form a key pair: %w", certName, keyName, err)
	}
	return KeyPair{CertPEM: certPEM, KeyPEM: keyPEM}, nil
}

func (r *Rotator) write(kp KeyPair, certName, keyName string) error {
	// The key first: a reader that sees the new certificate finds its key.
	if err := writeFile(filepath.Join(r.Dir, keyName), kp.KeyPEM); err != nil {
		return err
	}
	return writeFile(filepath.Join(r.Dir, certName), kp.CertPEM)
}

// writeFile replaces a file atomically, so a watcher never reads half of it.
func writeFile(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("replacing %s: %w", path, err)
	}
	return nil
}

func signedBy(leaf, ca KeyPair) bool {
	l, err1 := leaf.Certificate()
	c, err2 := ca.Certificate()
	return errors.Join(err1, err2) == nil && l.CheckSignatureFrom(c) == nil
}
