#!/usr/bin/env bash
# The API module (api/) is what the Express operator imports: it must not drag
# in this project's dependencies. It may import the standard library,
# k8s.io/apimachinery and itself — so everything it pulls in is apimachinery's
# own — and its go.mod may require nothing else directly.
set -euo pipefail
cd "$(dirname "$0")/../api"

direct=$(go list -m -f '{{if not .Main}}{{if not .Indirect}}{{.Path}}{{end}}{{end}}' all)
if [ "$direct" != "k8s.io/apimachinery" ]; then
  echo "api/go.mod must require k8s.io/apimachinery only, it requires:" $direct >&2
  exit 1
fi

self=$(go list -m)
bad=$(go list -f '{{range .Imports}}{{.}}{{"\n"}}{{end}}' ./... | sort -u | while read -r pkg; do
  case "$pkg" in
    "$self"/*|k8s.io/apimachinery/*) ;;
    *.*/*) echo "$pkg" ;; # a path with a dot in its first element is not the standard library
  esac
done)
if [ -n "$bad" ]; then
  echo "the API imports packages beyond k8s.io/apimachinery:" $bad >&2
  exit 1
fi
go vet ./...
echo "api/: imports the standard library and k8s.io/apimachinery only ($(go list -deps -f '{{with .Module}}{{if not .Main}}{{.Path}}{{end}}{{end}}' ./... | sort -u | wc -l) modules, all apimachinery's own)"
