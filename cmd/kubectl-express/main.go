// Command kubectl-express is a kubectl plugin for Express tenants: why a
// node is (not) moving, the order a tenant will roll in, what the admission
// webhook would inject, and pausing a rollout. Install it on the PATH and
// run `kubectl express --help`.
package main

import (
	"fmt"
	"os"
)

func main() {
	if err := newRootCommand(os.Stdin, os.Stdout, os.Stderr).Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
