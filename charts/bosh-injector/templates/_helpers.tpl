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

{{- /* The embedded config server's pods: a name of their own too, so neither
the operator's nor CoreDNS's Services, Deployments and PodDisruptionBudgets
select them. */ -}}
{{- define "bosh-injector.configServerSelectorLabels" -}}
app.kubernetes.io/name: {{ include "bosh-injector.name" . }}-config-server
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

{{- /* The embedded config server's Deployment, Service, ServiceAccount and
RBAC, PodDisruptionBudget and Certificate. */ -}}
{{- define "bosh-injector.configServer" -}}{{ include "bosh-injector.fullname" . }}-config-server{{- end -}}

{{- /* Its certificate's Secret: the server serves tls.crt and tls.key, the
operator and the credhub CLI trust its ca.crt. */ -}}
{{- define "bosh-injector.configServerTLSSecret" -}}{{ include "bosh-injector.configServer" . }}-tls{{- end -}}

{{- /* The ConfigMap of external mode's CA files (see configServerCAData). */ -}}
{{- define "bosh-injector.configServerCAConfigMap" -}}{{ include "bosh-injector.configServer" . }}-ca{{- end -}}

{{- /* CredHub's port, which directors' and the CLI's configurations expect. */ -}}
{{- define "bosh-injector.configServerPort" -}}8844{{- end -}}

{{- /* In external mode, the files the operator trusts the config server and
UAA with, as data of the ConfigMap <fullname>-config-server-ca; empty when
none is set. */ -}}
{{- define "bosh-injector.configServerCAData" -}}
{{- if eq .Values.configServer.mode "external" -}}
{{- with .Values.configServer.external -}}
{{- $data := dict -}}
{{- with .caCert }}{{ $_ := set $data "ca.crt" . }}{{ end -}}
{{- with .uaa.caCert }}{{ $_ := set $data "uaa-ca.crt" . }}{{ end -}}
{{- with .publicKey }}{{ $_ := set $data "public-key.pem" . }}{{ end -}}
{{- with $data }}{{ toYaml . }}{{ end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- /* The operator's and the config server's director names: the default
and each namespace's own (as args list items). */ -}}
{{- define "bosh-injector.directorArgs" -}}
- --director-name={{ .Values.configServer.directorName }}
{{- range $ns, $director := .Values.configServer.namespaceDirectorNames }}
- --namespace-director-name={{ $ns }}={{ $director }}
{{- end }}
{{- end -}}
