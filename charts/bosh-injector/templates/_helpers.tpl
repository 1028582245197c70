{{- define "bosh-injector.name" -}}bosh-injector{{- end -}}

{{- define "bosh-injector.fullname" -}}
{{- if contains "bosh-injector" .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-bosh-injector" .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "bosh-injector.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "bosh-injector.selectorLabels" -}}
app.kubernetes.io/name: {{ include "bosh-injector.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- /* The CoreDNS pods: a name of their own, so the operator's Service,
Deployment and PodDisruptionBudget never select them. */ -}}
{{- define "bosh-injector.dnsSelectorLabels" -}}
app.kubernetes.io/name: {{ include "bosh-injector.name" . }}-dns
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "bosh-injector.labels" -}}
{{ include "bosh-injector.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ .Chart.Name }}-{{ .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- /* The serving certificate's Secret, mounted by the webhook. */ -}}
{{- define "bosh-injector.servingSecret" -}}{{ include "bosh-injector.fullname" . }}-serving-cert{{- end -}}

{{- define "bosh-injector.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{ .Values.serviceAccount.name | default (include "bosh-injector.fullname" .) }}
{{- else -}}
{{ required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end -}}
{{- end -}}
