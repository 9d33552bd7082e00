{{/*
Chart name, overridable. Truncated to 63 characters: the DNS label limit of names and label values.
*/}}
{{- define "strata-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Prefix of every resource name: release name plus chart name, without repeating the chart name
when the release name already contains it (release "strata-operator" gives "strata-operator").
*/}}
{{- define "strata-operator.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Value of the helm.sh/chart label: name-version, with "+" (invalid in labels) replaced.
*/}}
{{- define "strata-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels on every object the chart creates.
*/}}
{{- define "strata-operator.labels" -}}
helm.sh/chart: {{ include "strata-operator.chart" . }}
{{ include "strata-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/component: operator
app.kubernetes.io/part-of: strata
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Labels that identify the operator pods; immutable in the Deployment selector, so keep them few and stable.
*/}}
{{- define "strata-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "strata-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
ServiceAccount the operator runs as.
*/}}
{{- define "strata-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "strata-operator.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Image reference; the tag defaults to the chart's appVersion so chart and operator versions move together.
*/}}
{{- define "strata-operator.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
Name of the leader-election Lease; per release, so two releases in one namespace do not share a leader.
*/}}
{{- define "strata-operator.leaseName" -}}
{{- include "strata-operator.fullname" . }}
{{- end }}

{{/*
Settings the schema cannot express. Included by the Deployment so `helm template` and `helm install` both refuse them.
*/}}
{{- define "strata-operator.validate" -}}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail (printf "replicaCount=%d needs leaderElection.enabled=true: without a leader Lease every replica would reconcile the same CacheClusters at once. Set replicaCount=1 or enable leader election." (int .Values.replicaCount)) }}
{{- end }}
{{- if eq .Values.image.tag "latest" }}
{{- fail "image.tag=latest is refused: the operator must match the CRD this chart installs. Pin a version such as 0.1.0 (empty means the chart's appVersion), optionally with @sha256:<digest>." }}
{{- end }}
{{- end }}
