// Package certs provides the webhook's serving certificate when no
// cert-manager is at hand: it creates a self-signed CA and a serving
// certificate in the cert directory, injects the CA bundle into the webhook
// configurations, and renews both before they expire. The webhook server
// watches the directory and serves renewed certificates without a restart.
//
// In clusters with cert-manager, a Certificate writes the same files and the
// cainjector fills in the CA bundle; this package is then not used.
package certs
