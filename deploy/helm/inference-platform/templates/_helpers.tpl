{{/* Helpers. The templates use only the subset test/support/helm-template.ts renders (docs/deploying.md). */}}

{{/* The name of every object: the release's, then the chart's, at most 63 characters. */}}
{{- define "inference-platform.fullname" -}}
{{- .Values.fullnameOverride | default (printf "%s-%s" .Release.Name .Chart.Name) | trunc 63 | trimSuffix "-" -}}
{{- end }}

{{/* Labels that select the server's pods. */}}
{{- define "inference-platform.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: server
{{- end }}

{{/* Labels of every object. */}}
{{- define "inference-platform.labels" -}}
{{ include "inference-platform.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end }}

{{/* The namespace the Kubernetes provider writes pods and Secrets to. */}}
{{- define "inference-platform.providerNamespace" -}}
{{- .Values.kubernetes.namespace | default .Release.Namespace -}}
{{- end }}
