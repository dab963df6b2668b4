{{/*
The chart name (app.kubernetes.io/name).
*/}}
{{- define "tenantcost.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The full name of the release's objects: RELEASE-tenantcost, or RELEASE when it already
contains the chart name; at most 63 characters.
*/}}
{{- define "tenantcost.fullname" -}}
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
A CronJob's name: the full name cut to 24 characters, then the job; at most 52 characters
(Kubernetes adds 11 to name the Jobs). Takes (list $ "ingest-default").
*/}}
{{- define "tenantcost.cronJobName" -}}
{{- $root := index . 0 }}
{{- printf "%s-%s" (include "tenantcost.fullname" $root | trunc 24 | trimSuffix "-") (index . 1) | trunc 52 | trimSuffix "-" }}
{{- end }}

{{/*
chart: name-version, for the helm.sh/chart label.
*/}}
{{- define "tenantcost.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object.
*/}}
{{- define "tenantcost.labels" -}}
helm.sh/chart: {{ include "tenantcost.chart" . }}
{{ include "tenantcost.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: tenantcost
{{- end }}

{{/*
Selector labels of the release's pods (every component).
*/}}
{{- define "tenantcost.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tenantcost.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
Selector labels of the serve pods.
*/}}
{{- define "tenantcost.serveSelectorLabels" -}}
{{ include "tenantcost.selectorLabels" . }}
app.kubernetes.io/component: serve
{{- end }}

{{/*
The ServiceAccount of the serve pods and the CronJobs.
*/}}
{{- define "tenantcost.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "tenantcost.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
Whether the pods mount the ServiceAccount's token: as set, else only for a cloud identity
(ServiceAccount annotations).
*/}}
{{- define "tenantcost.automountToken" -}}
{{- if kindIs "bool" .Values.serviceAccount.automountToken }}
{{- .Values.serviceAccount.automountToken }}
{{- else }}
{{- not (empty .Values.serviceAccount.annotations) }}
{{- end }}
{{- end }}

{{/*
The image: repository:tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "tenantcost.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/*
The Secret the pods take their environment from.
*/}}
{{- define "tenantcost.secretName" -}}
{{- default (include "tenantcost.fullname" .) .Values.secrets.existingSecret }}
{{- end }}

{{/*
"true" when the store is SQLite on the chart's claim.
*/}}
{{- define "tenantcost.sqlite" -}}
{{- if eq .Values.database.type "sqlite" }}true{{ end }}
{{- end }}

{{/*
The claim of the SQLite store.
*/}}
{{- define "tenantcost.sqliteClaim" -}}
{{- default (printf "%s-sqlite" (include "tenantcost.fullname" .)) .Values.database.sqlite.persistence.existingClaim }}
{{- end }}

{{/*
The ReadWriteMany claim of the data directory (PostgreSQL without data.url).
*/}}
{{- define "tenantcost.dataClaim" -}}
{{- default (printf "%s-data" (include "tenantcost.fullname" .)) .Values.data.persistence.existingClaim }}
{{- end }}

{{/*
"true" when the data directory is a folder on the ReadWriteMany claim.
*/}}
{{- define "tenantcost.dataOnClaim" -}}
{{- if and (not .Values.data.url) (not (include "tenantcost.sqlite" .)) }}true{{ end }}
{{- end }}

{{/*
TENANTCOST_DATA: the object-storage URL, or the folder on a claim.
*/}}
{{- define "tenantcost.dataDir" -}}
{{- default "/var/lib/tenantcost/data" .Values.data.url }}
{{- end }}

{{/*
Checks of values the schema cannot express; `fail` with a message naming the fix.
*/}}
{{- define "tenantcost.validate" -}}
{{- if and (include "tenantcost.sqlite" .) (gt (int .Values.replicaCount) 1) }}
{{- fail (printf "database.type sqlite allows one serve replica (replicaCount is %d): a SQLite file on a ReadWriteOnce claim has one writer; use database.type postgresql for more replicas" (int .Values.replicaCount)) }}
{{- end }}
{{- if and (not .Values.secrets.existingSecret) (not (include "tenantcost.sqlite" .)) (not .Values.secrets.databaseUrl) }}
{{- fail "database.type postgresql needs the database URL: set secrets.databaseUrl, or secrets.existingSecret with the key TENANTCOST_DB" }}
{{- end }}
{{- $names := dict }}
{{- range .Values.opencost.clusters }}
{{- if hasKey $names .name }}
{{- fail (printf "opencost.clusters: the name %q is given twice (each cluster has its own CronJob)" .name) }}
{{- end }}
{{- $_ := set $names .name true }}
{{- end }}
{{- end }}

{{/*
The pod security context of every pod.
*/}}
{{- define "tenantcost.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser }}
runAsGroup: {{ .Values.securityContext.runAsGroup }}
fsGroup: {{ .Values.securityContext.fsGroup }}
fsGroupChangePolicy: OnRootMismatch
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
The security context of every container.
*/}}
{{- define "tenantcost.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: {{ .Values.securityContext.runAsUser }}
runAsGroup: {{ .Values.securityContext.runAsGroup }}
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop:
    - ALL
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{/*
Environment of every container: the settings file, the data directory, the SQLite URL,
the extra variables (the Secret's come through envFrom; `env` wins over it).
Takes (dict "root" $ "store" true|false): store false leaves the data directory out when it
is on a claim (the hook Job, which cannot mount it).
*/}}
{{- define "tenantcost.env" -}}
{{- $root := .root -}}
- name: TENANTCOST_SETTINGS
  value: /etc/tenantcost/settings.yaml
{{- if or .store $root.Values.data.url }}
- name: TENANTCOST_DATA
  value: {{ include "tenantcost.dataDir" $root | quote }}
{{- end }}
{{- if include "tenantcost.sqlite" $root }}
- name: TENANTCOST_DB
  value: sqlite:////var/lib/tenantcost/tenantcost.db
{{- end }}
- name: HOME
  value: /tmp
{{- with $root.Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
envFrom of every container: the Secret (the chart's or secrets.existingSecret).
*/}}
{{- define "tenantcost.envFrom" -}}
- secretRef:
    name: {{ include "tenantcost.secretName" . }}
{{- end }}

{{/*
Volume mounts of every container. Takes (dict "root" $ "store" true|false).
*/}}
{{- define "tenantcost.volumeMounts" -}}
- name: config
  mountPath: /etc/tenantcost
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if .store }}
{{- if include "tenantcost.sqlite" .root }}
- name: store
  mountPath: /var/lib/tenantcost
{{- else if include "tenantcost.dataOnClaim" .root }}
- name: data
  mountPath: /var/lib/tenantcost/data
{{- end }}
{{- end }}
{{- end }}

{{/*
Volumes of every pod. Takes (dict "root" $ "store" true|false).
*/}}
{{- define "tenantcost.volumes" -}}
- name: config
  configMap:
    name: {{ include "tenantcost.fullname" .root }}
- name: tmp
  emptyDir:
    sizeLimit: {{ .root.Values.tmpSizeLimit }}
{{- if .store }}
{{- if include "tenantcost.sqlite" .root }}
- name: store
  persistentVolumeClaim:
    claimName: {{ include "tenantcost.sqliteClaim" .root }}
{{- else if include "tenantcost.dataOnClaim" .root }}
- name: data
  persistentVolumeClaim:
    claimName: {{ include "tenantcost.dataClaim" .root }}
{{- end }}
{{- end }}
{{- end }}

{{/*
Scheduling of every pod but the CronJobs' affinity (see tenantcost.cronJob).
*/}}
{{- define "tenantcost.scheduling" -}}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end }}

{{/*
The annotations that roll the pods when the settings, the rule file or the secrets change.
*/}}
{{- define "tenantcost.checksums" -}}
checksum/config: {{ include (print .Template.BasePath "/configmap.yaml") . | sha256sum }}
checksum/secret: {{ .Values.secrets | toJson | sha256sum }}
{{- end }}

{{/*
A tenantcost container running one command. Takes (dict "root" $ "name" NAME "args" LIST
"store" true|false "resources" MAP).
*/}}
{{- define "tenantcost.container" -}}
- name: {{ .name }}
  image: {{ include "tenantcost.image" .root | quote }}
  imagePullPolicy: {{ .root.Values.image.pullPolicy }}
  args:
    {{- toYaml .args | nindent 4 }}
  env:
    {{- include "tenantcost.env" (dict "root" .root "store" .store) | nindent 4 }}
  envFrom:
    {{- include "tenantcost.envFrom" .root | nindent 4 }}
  {{- with .resources }}
  resources:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  securityContext:
    {{- include "tenantcost.containerSecurityContext" .root | nindent 4 }}
  volumeMounts:
    {{- include "tenantcost.volumeMounts" (dict "root" .root "store" .store) | nindent 4 }}
{{- end }}

{{/*
The migration step's containers: db upgrade, then rules load when `rules` is set.
Takes (dict "root" $ "store" true|false); returns (as YAML) {init: [...], main: [...]}: with a
rule file, db upgrade runs first as an init container.
*/}}
{{- define "tenantcost.migrationArgs" -}}
{{- $wait := printf "%v" .root.Values.jobs.waitSeconds }}
upgrade:
  - db
  - upgrade
  - --wait
  - {{ $wait | quote }}
{{- if .root.Values.rules }}
rules:
  - rules
  - load
  - /etc/tenantcost/rules.yaml
  - --wait
  - {{ $wait | quote }}
{{- end }}
{{- end }}

{{/*
A CronJob. Takes (dict "root" $ "name" SUFFIX "component" NAME "args" LIST "job" VALUES).
*/}}
{{- define "tenantcost.cronJob" -}}
{{- $root := .root }}
{{- $job := .job }}
apiVersion: batch/v1
kind: CronJob
metadata:
  name: {{ include "tenantcost.cronJobName" (list $root .name) }}
  labels:
    {{- include "tenantcost.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  schedule: {{ $job.schedule | quote }}
  timeZone: {{ $root.Values.jobs.timeZone | quote }}
  concurrencyPolicy: Forbid
  startingDeadlineSeconds: {{ $job.startingDeadlineSeconds }}
  successfulJobsHistoryLimit: {{ $root.Values.jobs.successfulJobsHistoryLimit }}
  failedJobsHistoryLimit: {{ $root.Values.jobs.failedJobsHistoryLimit }}
  jobTemplate:
    metadata:
      labels:
        {{- include "tenantcost.labels" $root | nindent 8 }}
        app.kubernetes.io/component: {{ .component }}
    spec:
      activeDeadlineSeconds: {{ $job.activeDeadlineSeconds }}
      backoffLimit: {{ $job.backoffLimit }}
      ttlSecondsAfterFinished: {{ $root.Values.jobs.ttlSecondsAfterFinished }}
      template:
        metadata:
          labels:
            {{- include "tenantcost.selectorLabels" $root | nindent 12 }}
            app.kubernetes.io/component: {{ .component }}
          annotations:
            {{- include "tenantcost.checksums" $root | nindent 12 }}
        spec:
          restartPolicy: Never
          serviceAccountName: {{ include "tenantcost.serviceAccountName" $root }}
          automountServiceAccountToken: {{ include "tenantcost.automountToken" $root }}
          securityContext:
            {{- include "tenantcost.podSecurityContext" $root | nindent 12 }}
          {{- with include "tenantcost.scheduling" $root }}
          {{- . | nindent 10 }}
          {{- end }}
          {{- if and (include "tenantcost.sqlite" $root) $root.Values.database.sqlite.colocate }}
          affinity:
            podAffinity:
              requiredDuringSchedulingIgnoredDuringExecution:
                - topologyKey: kubernetes.io/hostname
                  labelSelector:
                    matchLabels:
                      {{- include "tenantcost.serveSelectorLabels" $root | nindent 22 }}
          {{- else }}
          {{- with $root.Values.affinity }}
          affinity:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          {{- end }}
          containers:
            {{- include "tenantcost.container" (dict "root" $root "name" .component "args" .args "store" true "resources" (default $root.Values.jobs.resources $job.resources)) | nindent 12 }}
          volumes:
            {{- include "tenantcost.volumes" (dict "root" $root "store" true) | nindent 12 }}
{{- end }}
