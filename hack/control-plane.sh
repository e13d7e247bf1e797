#!/usr/bin/env bash
# Prints a directory holding the control plane the tests and the demo run —
# kube-apiserver, etcd and kubectl, and Kubernetes' own control loops:
# kube-controller-manager, kube-scheduler and KWOK (the kubelet of fake
# Nodes) with its stages in kwok-stages.yaml — building what is missing from
# source (hack/tools, hack/kwok) into bin/k8s. Idempotent: binaries are
# rebuilt only when a tools module or the version changed; the stages are
# written on every run. An existing
# KUBEBUILDER_ASSETS with all of them is used as it is.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
binaries=(kube-apiserver etcd kubectl kube-controller-manager kube-scheduler kwok kwok-stages.yaml)

complete() {
  local dir=$1 b
  for b in "${binaries[@]}"; do
    [ -e "$dir/$b" ] || return 1
  done
}

if [ -n "${KUBEBUILDER_ASSETS:-}" ] && [ -x "$KUBEBUILDER_ASSETS/kube-apiserver" ] && [ -x "$KUBEBUILDER_ASSETS/etcd" ]; then
  if complete "$KUBEBUILDER_ASSETS"; then
    echo "$KUBEBUILDER_ASSETS"
    exit 0
  fi
  echo "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks some of ${binaries[*]}; building the whole set into bin/k8s" >&2
fi

out="$root/bin/k8s"
stamp="$out/.stamp"
version=v1.36.3
# The binaries are stale when a tools module or the version changed.
want=$( (cat "$root/hack/tools/go.mod" "$root/hack/tools/go.sum" "$root/hack/kwok/go.mod" "$root/hack/kwok/go.sum"; echo "$version") | sha256sum | cut -d' ' -f1)
# KWOK's own stages: nodes become Ready and keep a heartbeat; pods are
# created, become Ready and are deleted after their grace period, each
# after the delay a pod's annotations ask for (pod-ready.stage.kwok.x-k8s.io/delay, ...);
# and ours: a pod annotated to crash fails in place (hack/kwok/stage-crash-loop.yaml),
# and a running pod marked not Ready for its late Node is Ready again
# (hack/kwok/stage-pod-ready-again.yaml).
# Written again on every run (it takes a moment), the binaries only when stale.
stages() {
  local dir
  dir=$(cd "$root/hack/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
  for f in "$dir"/node/fast/node-initialize.yaml "$dir"/node/heartbeat/node-heartbeat.yaml "$dir"/pod/general/*.yaml "$root"/hack/kwok/stage-*.yaml; do
    printf -- '---\n'
    cat "$f"
  done | {
    # A heartbeat every 1–2 s, not KWOK's 20–45 s: kube-controller-manager
    # runs with --node-monitor-grace-period=10s (a lost Node is noticed in
    # seconds), and a Node it marks NotReady has every pod on it marked not
    # Ready, which KWOK's stages never undo. A pod of the broken build
    # (image express:broken) is never made Ready, nor one a test holds
    # (annotation ready.stage.kwok.x-k8s.io/hold: a build that runs and
    # never becomes Ready).
    sed -e '/name: node-heartbeat$/,/^---/{s/durationMilliseconds: 20000/durationMilliseconds: 1000/;s/jitterDurationMilliseconds: 25000/jitterDurationMilliseconds: 2000/}' \
      -e "/name: pod-ready\$/,/^---/{s/^    matchExpressions:\$/    matchExpressions:\n    - key: '.spec.containers.[].image'\n      operator: 'NotIn'\n      values:\n      - 'express:broken'\n    - key: '.metadata.annotations[\"ready.stage.kwok.x-k8s.io\/hold\"]'\n      operator: 'DoesNotExist'/}"
  } > "$out/kwok-stages.yaml.new"
  mv "$out/kwok-stages.yaml.new" "$out/kwok-stages.yaml"
}

if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && complete "$out"; then
  stages
  echo "$out"
  exit 0
fi

mkdir -p "$out"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=36 -X k8s.io/client-go/pkg/version.gitVersion=$version -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=36"
echo "Building kube-apiserver, kube-controller-manager, kube-scheduler $version, etcd, kubectl and KWOK from source into bin/k8s (first time only: about 7 minutes on 2 cores)..." >&2
start=$(date +%s)
(cd "$root/hack/tools" && go build -trimpath -ldflags "$ldflags" -o "$out/" ./kube-apiserver ./etcd ./kubectl ./kube-controller-manager ./kube-scheduler) >&2
(cd "$root/hack/kwok" && go build -trimpath -o "$out/kwok" sigs.k8s.io/kwok/cmd/kwok) >&2
stages
echo "$want" > "$stamp"
echo "Built the control plane in $(( $(date +%s) - start ))s" >&2
echo "$out"
