#!/usr/bin/env bash
# Builds kubectl-express for every platform of plugins/express.yaml into
# dist/kubectl-express_<os>_<arch>.tar.gz and writes dist/express.yaml, the
# krew manifest with the version and each archive's sha256.
set -euo pipefail
version=${1:?usage: hack/release-plugin.sh VERSION}
cd "$(dirname "$0")/.."
mkdir -p dist
manifest=$(cat plugins/express.yaml)
manifest=${manifest//\{\{VERSION\}\}/$version}
for platform in linux/amd64 linux/arm64 darwin/amd64 darwin/arm64; do
  os=${platform%/*} arch=${platform#*/}
  work=$(mktemp -d)
  echo "building kubectl-express $version for $os/$arch" >&2
  CGO_ENABLED=0 GOOS=$os GOARCH=$arch go -C cmd/kubectl-express build -trimpath -ldflags "-s -w -X main.version=$version" -o "$work/kubectl-express" .
  cp README.md "$work/"
  archive=dist/kubectl-express_${os}_${arch}.tar.gz
  tar -C "$work" -czf "$archive" kubectl-express README.md
  rm -rf "$work"
  sum=$(sha256sum "$archive" | cut -d' ' -f1)
  manifest=${manifest//\{\{SHA256_${os}_${arch}\}\}/$sum}
done
printf '%s\n' "$manifest" >dist/express.yaml
echo "wrote dist/express.yaml and $(ls dist/*.tar.gz | wc -l) archives" >&2
