{{/*
Names, labels and shared fragments. Every name is truncated to 63 characters (the DNS label limit of
Kubernetes names and label values) without a trailing dash.
*/}}

{{/* The chart name, or nameOverride. */}}
{{- define "taskqueue-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The full name: fullnameOverride, else the release name when it already holds the chart name, else "<release>-<chart>". */}}
{{- define "taskqueue-operator.fullname" -}}
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

{{/* "<chart>-<version>" for the helm.sh/chart label. */}}
{{- define "taskqueue-operator.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels of every object. */}}
{{- define "taskqueue-operator.labels" -}}
helm.sh/chart: {{ include "taskqueue-operator.chart" . }}
{{ include "taskqueue-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: taskqueue-operator
{{- end }}

{{/* Labels that select the operator pods (immutable in a Deployment: never add to them). */}}
{{- define "taskqueue-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "taskqueue-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/component: operator
{{- end }}

{{/* The ServiceAccount the operator runs as. */}}
{{- define "taskqueue-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "taskqueue-operator.fullname" .) .Values.serviceAccount.name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* "<fullname>-<suffix>", truncated so the whole name fits in 63 characters. */}}
{{- define "taskqueue-operator.suffixed" -}}
{{- $suffix := index . 1 }}
{{- $base := include "taskqueue-operator.fullname" (index . 0) | trunc (int (sub 62 (len $suffix))) | trimSuffix "-" }}
{{- printf "%s-%s" $base $suffix }}
{{- end }}

{{/*
Name of a cluster-scoped object: "<fullname>-<release namespace>-<suffix>", so releases of the same
name in different namespaces do not collide; a hash keeps it unique when truncated to 63 characters.
*/}}
{{- define "taskqueue-operator.clusterName" -}}
{{- $ctx := index . 0 }}
{{- $suffix := index . 1 }}
{{- $base := printf "%s-%s" (include "taskqueue-operator.fullname" $ctx) $ctx.Release.Namespace }}
{{- $room := int (sub 62 (len $suffix)) }}
{{- if gt (len $base) $room }}
{{- $base = printf "%s-%s" ($base | trunc (int (sub $room 9)) | trimSuffix "-") ($base | sha256sum | trunc 8) }}
{{- end }}
{{- printf "%s-%s" $base $suffix }}
{{- end }}

{{/* The operator image reference: digest wins over tag; tag defaults to appVersion. */}}
{{- define "taskqueue-operator.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
{{- end }}

{{/* The namespaces the operator watches in namespaced mode (release namespace by default). */}}
{{- define "taskqueue-operator.watchNamespaces" -}}
{{- $namespaces := .Values.watchNamespaces | default (list .Release.Namespace) }}
{{- toJson $namespaces }}
{{- end }}

{{/* Fail early, with a readable message, on values that contradict each other. */}}
{{- define "taskqueue-operator.validate" -}}
{{- if and .Values.clusterWide .Values.watchNamespaces }}
{{- fail "values: set clusterWide=true OR watchNamespaces, not both (clusterWide watches every namespace)" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (not .Values.leaderElection.enabled) }}
{{- fail "values: replicaCount > 1 needs leaderElection.enabled=true, or replicas would scale the same TaskQueues concurrently" }}
{{- end }}
{{- if and .Values.sharding.enabled (not .Values.leaderElection.enabled) }}
{{- fail "values: sharding.enabled needs leaderElection.enabled=true (its leaseName names the shard Leases, its Role grants them)" }}
{{- end }}
{{- if and .Values.sharding.enabled (not (lt (mulf 2.0 (float64 .Values.sharding.renewSeconds)) (float64 .Values.sharding.leaseSeconds))) }}
{{- fail "values: sharding.renewSeconds must be under half of sharding.leaseSeconds" }}
{{- end }}
{{- end }}

{{/* Labels of the console's objects: the chart's, with component "console". */}}
{{- define "taskqueue-operator.consoleLabels" -}}
{{ include "taskqueue-operator.labels" . | replace "app.kubernetes.io/component: operator" "app.kubernetes.io/component: console" }}
{{- end }}

{{/* Labels that select the console pod. */}}
{{- define "taskqueue-operator.consoleSelectorLabels" -}}
app.kubernetes.io/name: {{ include "taskqueue-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/component: console
{{- end }}
