#!/bin/sh
# Renders config/argocd/health.lua into the two forms Argo CD takes it in:
# an argocd-cm ConfigMap and values for the argo-cd Helm chart (configs.cm).
# Run by `make manifests`; `make verify` fails if the committed files differ.
set -eu
dir=config/argocd
lua=$dir/health.lua
indent() { sed "s/^/$1/; s/^ *$//" "$lua"; }
{
  echo "# Generated from health.lua by 'make manifests'. Merge into Argo CD's argocd-cm,"
  echo "# e.g. kubectl -n argocd patch configmap argocd-cm --patch-file argocd-cm.yaml"
  echo "apiVersion: v1"
  echo "kind: ConfigMap"
  echo "metadata:"
  echo "  name: argocd-cm"
  echo "  namespace: argocd"
  echo "  labels:"
  echo "    app.kubernetes.io/part-of: argocd"
  echo "data:"
  for kind in Backend Frontend; do
    echo "  resource.customizations.health.express.medallia.com_$kind: |"
    indent "    "
  done
} >"$dir/argocd-cm.yaml"
{
  echo "# Generated from health.lua by 'make manifests'. Values for the argo-cd Helm chart:"
  echo "#   helm upgrade argocd argo/argo-cd -f argo-cd-values.yaml --reuse-values"
  echo "configs:"
  echo "  cm:"
  for kind in Backend Frontend; do
    echo "    resource.customizations.health.express.medallia.com_$kind: |"
    indent "      "
  done
} >"$dir/argo-cd-values.yaml"
