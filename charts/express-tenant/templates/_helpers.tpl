{{/*
Labels on every node of the tenant.
*/}}
{{- define "common.labels" -}}
app.kubernetes.io/name: express
app.kubernetes.io/part-of: express-tenant
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
express.medallia.com/instance: {{ .Values.instance }}
express.medallia.com/tenant-id: {{ .Values.instanceId | quote }}
express.medallia.com/dc: {{ .Values.dc | quote }}
express.medallia.com/provisioning: {{ .Values.provisioning | toString | quote }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
A prerequisite list: each entry completed with the fields the API server
would default (podConditionType Ready, conditionStatus "True"), so that what
is stored is what was rendered.
*/}}
{{- define "express.prerequisites" -}}
{{- $out := list }}
{{- range . }}
{{- $out = append $out (merge (dict) . (dict "podConditionType" "Ready" "conditionStatus" "True")) }}
{{- end }}
{{- $out | toJson }}
{{- end }}

{{/*
The spec of one node: its rollout target. Takes a dict: root (the chart's
top scope), key (be, fe1, …) and node (its values).
*/}}
{{- define "express.nodeSpec" -}}
{{- $root := .root }}
{{- $node := .node }}
{{- $kind := ternary "Backend" "Frontend" (eq .key "be") }}
{{- $revision := $node.deploymentRevision | default $root.Values.deploymentRevision | toString -}}
clusterConfig:
  clusterName: {{ $root.Values.instance }}
  tenantID: {{ $root.Values.instanceId | quote }}
  tenantName: {{ $root.Values.instance }}
up: {{ ne $node.up false }}
expressVersion: {{ $node.expressVersion | default (get $root.Values.expressVersion $kind) | quote }}
configChangeset: {{ $node.configChangeset | default (get $root.Values.configChangeset $kind) | quote }}
{{- with $revision }}
deploymentRevision: {{ . | quote }}
{{- end }}
{{- if or $root.Values.disableDependencies $node.disableDependencies }}
deploymentDependencies:
  provisioningPrerequisites: []
  upgradePrerequisites: []
{{- else if or (hasKey $node "provisioningPrerequisites") (hasKey $node "upgradePrerequisites") }}
deploymentDependencies:
  {{- if hasKey $node "provisioningPrerequisites" }}
  provisioningPrerequisites: {{ include "express.prerequisites" ($node.provisioningPrerequisites | default list) }}
  {{- end }}
  {{- if hasKey $node "upgradePrerequisites" }}
  upgradePrerequisites: {{ include "express.prerequisites" ($node.upgradePrerequisites | default list) }}
  {{- end }}
{{- end }}
{{- end }}

{{/*
The rollout-id of a render: a hash of the values and of every node's spec as
rendered, so that any change of any node's target — by the values or by the
templates of a new chart — comes with a new id.
*/}}
{{- define "express.rolloutID" -}}
{{- $specs := dict }}
{{- range $key, $node := .Values.nodes }}
{{- $_ := set $specs $key (include "express.nodeSpec" (dict "root" $ "key" $key "node" $node)) }}
{{- end }}
{{- list .Values $specs | toJson | sha256sum | trunc 16 }}
{{- end }}
