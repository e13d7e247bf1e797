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
