{{- define "es.name" -}}express-sequencer{{- end }}
{{- /* The labels Helm recommends, on every object. */}}
{{- define "es.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: express-sequencer
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: express-sequencer
{{- end }}
{{- define "es.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
{{- define "es.selector" -}}
app.kubernetes.io/name: express-sequencer
{{- end }}
{{- define "es.certDir" -}}/tmp/k8s-webhook-server/serving-certs{{- end }}
{{- define "es.caFrom" -}}{{ .Release.Namespace }}/express-sequencer-serving-cert{{- end }}
