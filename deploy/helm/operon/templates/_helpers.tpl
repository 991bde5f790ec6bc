{{/* The chart's name. */}}
{{- define "operon.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The objects' base name: the release name, prefixed with the chart's name when it does not contain it. */}}
{{- define "operon.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* The labels the Deployment selects its pods by (and the Service and the budget). */}}
{{- define "operon.selectorLabels" -}}
app.kubernetes.io/name: {{ include "operon.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* Labels of every object; the component is added where it applies. */}}
{{- define "operon.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "operon.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: operon
{{- end -}}

{{- define "operon.hooksConfigMap" -}}
{{- default (printf "%s-hooks" (include "operon.fullname" .)) .Values.hooks.configMap.name -}}
{{- end -}}

{{- define "operon.leaseName" -}}
{{- default (include "operon.fullname" .) .Values.leaderElection.leaseName -}}
{{- end -}}

{{/* The Service in front of every replica's webhook servers. */}}
{{- define "operon.webhookService" -}}
{{- default (printf "%s-webhooks" (include "operon.fullname" .)) .Values.webhooks.service.name -}}
{{- end -}}

{{/* The ValidatingWebhookConfiguration's and the MutatingWebhookConfiguration's name. */}}
{{- define "operon.webhookConfiguration" -}}
{{- default (printf "%s-webhooks" (include "operon.fullname" .)) .Values.webhooks.configurationName -}}
{{- end -}}

{{/* The Secret holding the webhooks' certificate. */}}
{{- define "operon.webhookTlsSecret" -}}
{{- default (printf "%s-webhook-tls" (include "operon.fullname" .)) .Values.webhooks.tlsSecret -}}
{{- end -}}

{{/* The Secret holding the Alertmanager receiver's bearer token. */}}
{{- define "operon.alertmanagerTokenSecret" -}}
{{- default (printf "%s-alertmanager-token" (include "operon.fullname" .)) .Values.alertmanager.tokenSecret -}}
{{- end -}}

{{- define "operon.modulesConfigMap" -}}
{{- .Values.modules.configMap.name | default (printf "%s-modules" (include "operon.fullname" .)) }}
{{- end }}
