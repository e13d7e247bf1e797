{{- define "es.name" -}}express-sequencer{{- end }}
{{- define "es.labels" -}}
app.kubernetes.io/name: express-sequencer
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}
{{- define "es.selector" -}}
app.kubernetes.io/name: express-sequencer
{{- end }}
{{- define "es.certDir" -}}/tmp/k8s-webhook-server/serving-certs{{- end }}
{{- define "es.caFrom" -}}{{ .Release.Namespace }}/express-sequencer-serving-cert{{- end }}
