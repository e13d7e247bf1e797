//go:build tools

// Package tools pins KWOK's version for hack/control-plane.sh.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
