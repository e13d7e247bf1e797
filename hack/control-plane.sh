#!/usr/bin/env bash
# Prints a directory holding kube-apiserver, etcd and kubectl, building what
# is missing from source (hack/tools) into bin/k8s. Idempotent: binaries are
# rebuilt only when hack/tools/go.mod or go.sum changed. An existing
# KUBEBUILDER_ASSETS with kube-apiserver and etcd is used as it is.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)

if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ] && [ -x "$KUBEBUILDER_ASSETS/etcd" ]; then
  if [ -x "$KUBEBUILDER_ASSETS/kubectl" ]; then
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  echo "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS has no kubectl; building the whole set into bin/k8s" >&2
fi

out="$root/bin/k8s"
stamp="$out/.stamp"
want=$(cat "$root/hack/tools/go.mod" "$root/hack/tools/go.sum" "$0" | sha256sum | cut -d' ' -f1)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && [ -x "$out/kube-apiserver" ] && [ -x "$out/etcd" ] && [ -x "$out/kubectl" ]; then
  echo "$out"
  exit 0
fi

mkdir -p "$out"
version=v1.36.3
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/client-go/pkg/version.gitVersion=$version -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=36"
echo "Building kube-apiserver $version, etcd and kubectl from source into bin/k8s (first time only: about 6 minutes on 2 cores)..." >&2
start=$(date +%s)
(cd "$root/hack/tools" && go build -trimpath -ldflags "$ldflags" -o "$out/" ./kube-apiserver ./etcd ./kubectl) >&2
echo "$want" > "$stamp"
echo "Built the control plane in $(( $(date +%s) - start ))s" >&2
echo "$out"
