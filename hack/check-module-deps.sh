#!/usr/bin/env bash
# What only tests use stays in the tests' modules (test/go.mod, and Argo
# CD's code in test/argocd/go.mod): the module of the express-sequencer
# binary has no Helm, kustomize, cert-manager or Argo CD in its module
# graph, and the kubectl plugin's module (which needs k8s.io/cli-runtime,
# and through it kustomize for `-k`) has no Helm, cert-manager or Argo CD
# either; the tests' module has no Argo CD, which moves nothing there.
set -euo pipefail
cd "$(dirname "$0")/.."

check() { # dir, pattern of forbidden module paths
  local found
  found=$(cd "$1" && go list -m -f '{{.Path}}' all | grep -E "$2" || true)
  if [ -n "$found" ]; then
    echo "the module in $1 must not depend on these (they belong in a tests' module):" $found >&2
    exit 1
  fi
  echo "$1: $(cd "$1" && go list -m all | wc -l) modules, none of: $2"
}
argocd='github\.com/argoproj/'
test_only="^(helm\.sh/|github\.com/cert-manager/|$argocd)"
check . "${test_only%)}|sigs\.k8s\.io/kustomize/)"
check cmd/kubectl-express "$test_only"
check test "^$argocd"

# The pure decisions import no client and no clock: internal/rollout reaches
# neither controller-runtime, client-go nor a clock (the time comes in the
# snapshot).
deps=$(go list -deps ./internal/rollout) # fails the script if it cannot be listed
found=$(echo "$deps" | grep -E '^(sigs\.k8s\.io/controller-runtime|k8s\.io/client-go|k8s\.io/utils/clock)(/|$)' || true)
if [ -n "$found" ]; then
  echo "internal/rollout must decide without a client; it imports:" $found >&2
  exit 1
fi
echo "internal/rollout: no controller-runtime, no client-go, no clock"
