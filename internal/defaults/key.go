package defaults

import (
	"fmt"
	"strconv"
	"strings"

	v2alpha1 "github.com/medallia/express-sequencer/api/v2alpha1"
)

// BackendKey is the node key of a tenant's Backend.
const BackendKey = "be"

// frontendPrefix starts the node key of every Frontend: fe1, fe2, …
const frontendPrefix = "fe"

// Key is a node's place in its tenant: the Backend, or the Frontend with the
// given number.
type Key struct {
	// Frontend is the frontend number, 1 or more; 0 means the Backend.
	Frontend int
}

// Backend is the key of the tenant's Backend.
var Backend = Key{}

// FrontendKey returns the key of frontend number n.
func FrontendKey(n int) Key { return Key{Frontend: n} }

// IsBackend reports whether k is the Backend's key.
func (k Key) IsBackend() bool { return k.Frontend == 0 }

// Kind returns the CR kind a node with this key has.
func (k Key) Kind() string {
	if k.IsBackend() {
		return v2alpha1.KindBackend
	}
	return v2alpha1.KindFrontend
}

// String returns the key as written in values files: "be", "fe1", …
func (k Key) String() string {
	if k.IsBackend() {
		return BackendKey
	}
	return frontendPrefix + strconv.Itoa(k.Frontend)
}

// ParseKey parses "be" or "fe<n>" with n ≥ 1 and no leading zeros.
func ParseKey(s string) (Key, error) {
	if s == BackendKey {
		return Backend, nil
	}
	digits, ok := strings.CutPrefix(s, frontendPrefix)
	if ok && digits != "" && digits[0] != '0' && len(digits) <= 6 {
		if n, err := strconv.Atoi(digits); err == nil && n > 0 {
			return FrontendKey(n), nil
		}
	}
	return Key{}, fmt.Errorf("%q is not a node key: want %q or %q followed by a number from 1", s, BackendKey, frontendPrefix)
}

// NodeName returns the CR name of the node with key k in the tenant.
func NodeName(clusterName string, k Key) string { return clusterName + "-" + k.String() }

// KeyOfName returns the key of the node named name in the tenant, or false
// when the name is not <clusterName>-<key>.
func KeyOfName(clusterName, name string) (Key, bool) {
	rest, ok := strings.CutPrefix(name, clusterName+"-")
	if !ok || clusterName == "" {
		return Key{}, false
	}
	k, err := ParseKey(rest)
	return k, err == nil
}

// KeyOf returns the key of a node from its name and clusterConfig.clusterName,
// or false when the name fits no key or the kind does not match the key.
func KeyOf(n v2alpha1.Node) (Key, bool) {
	k, ok := KeyOfName(n.NodeSpec().ClusterConfig.ClusterName, n.GetName())
	if !ok || k.Kind() != n.NodeKind() {
		return Key{}, false
	}
	return k, true
}
