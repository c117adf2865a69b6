{{/* Names, labels and derived values shared by the templates. */}}

{{/*
Puts this chart's defaults where .Values lacks them; every template starts with
`{{- $_ := include "hookline.fillDefaults" . -}}`. `helm upgrade --reuse-values` renders with the
previous release's values and never reads this chart's values.yaml, so a block or setting a
newer chart added is missing (and .Values.block.field fails on the missing block). A missing or
null setting gets its default, and a missing block its defaults whole. The keys listed in
keepAbsent (_defaults.tpl, generated from values.yaml and the schema: a key whose schema allows
null, and a free-form map) stay absent in a block that has all its other settings: there absence
is a user's removal (Helm deletes a key set to null, e.g. startupProbe: null or
resources.limits: null). In a block that lacks some (it came from the user's values alone, the
previous chart having no such block, as with `--reuse-values --set tests.ping.subscription=x`),
they get their defaults too, unless the user set them to null. A fresh install's values lack
nothing else, so for them this changes nothing.
*/}}
{{- define "hookline.fillDefaults" -}}
{{- $defaults := include "hookline.defaults" . | fromJson }}
{{- if not (hasKey $defaults "values") }}
{{- fail (printf "templates/_defaults.tpl does not parse (%v): run npm run gen" $defaults.Error) }}
{{- end }}
{{- include "hookline.fill" (list .Values $defaults.values "" $defaults.keepAbsent) }}
{{- end }}

{{/* (list VALUES DEFAULTS PATH-PREFIX KEEP-ABSENT): fills VALUES in place, block by block. */}}
{{- define "hookline.fill" -}}
{{- $values := index . 0 }}
{{- $defaults := index . 1 }}
{{- $prefix := index . 2 }}
{{- $keepAbsent := index . 3 }}
{{- $complete := true }}
{{- if $prefix }}
{{- range $key, $default := $defaults }}
{{- if and (not (has (print $prefix $key) $keepAbsent)) (kindIs "invalid" (index $values $key)) }}
{{- $complete = false }}
{{- end }}
{{- end }}
{{- end }}
{{- range $key, $default := $defaults }}
{{- $path := print $prefix $key }}
{{- $value := index $values $key }}
{{- if has $path $keepAbsent }}
{{- if and (not $complete) (not (hasKey $values $key)) }}
{{- $_ := set $values $key $default }}
{{- end }}
{{- else if kindIs "invalid" $value }}
{{- $_ := set $values $key $default }}
{{- else if and (kindIs "map" $default) (kindIs "map" $value) }}
{{- include "hookline.fill" (list $value $default (print $path ".") $keepAbsent) }}
{{- end }}
{{- end }}
{{- end }}

{{- define "hookline.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hookline.fullname" -}}
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

{{- define "hookline.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hookline.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hookline.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "hookline.labels" -}}
helm.sh/chart: {{ include "hookline.chart" . }}
{{ include "hookline.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: hookline
{{- end }}

{{- define "hookline.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hookline.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "hookline.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{- define "hookline.leaseName" -}}
{{- default (printf "%s-leader" (include "hookline.fullname" .)) .Values.leaderElection.leaseName | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hookline.metricsServiceName" -}}
{{- printf "%s-metrics" (include "hookline.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{/* The kubernetes.io/tls Secret /metrics is served with: metrics.tls.secretName, or the one the chart makes. */}}
{{- define "hookline.metricsTlsSecret" -}}
{{- default (printf "%s-metrics-tls" (include "hookline.fullname" . | trunc 51 | trimSuffix "-")) .Values.metrics.tls.secretName }}
{{- end }}

{{/* Whether /metrics is served over HTTPS: with authentication, or with a certificate given. */}}
{{- define "hookline.metricsTls" -}}
{{- if or .Values.metrics.auth.enabled .Values.metrics.tls.secretName }}true{{ end }}
{{- end }}

{{/*
WEBHOOK_DRAIN_TIMEOUT_MS: explicit, or the grace period minus the margin. Refuses a drain timeout
that leaves less than the margin before SIGKILL.
*/}}
{{- define "hookline.drainTimeoutMs" -}}
{{- $grace := int .Values.terminationGracePeriodSeconds }}
{{- $margin := int .Values.drain.marginSeconds }}
{{- if lt $grace $margin }}
{{- fail (printf "terminationGracePeriodSeconds (%d) must be at least drain.marginSeconds (%d)" $grace $margin) }}
{{- end }}
{{- $budget := mul (sub $grace $margin) 1000 }}
{{- if kindIs "invalid" .Values.drain.timeoutMs }}
{{- $budget }}
{{- else }}
{{- $t := int64 .Values.drain.timeoutMs }}
{{- if gt $t (int64 $budget) }}
{{- fail (printf "drain.timeoutMs (%d) must leave drain.marginSeconds (%d s) of terminationGracePeriodSeconds (%d s): at most %d" $t $margin $grace $budget) }}
{{- end }}
{{- $t }}
{{- end }}
{{- end }}

{{/* Label matchers that select this install's series in alert expressions. */}}
{{- define "hookline.jobSelector" -}}
{{- default (printf "job=%q" (include "hookline.metricsServiceName" .)) .Values.prometheusRule.jobSelector }}
{{- end }}

{{/* The rules of the operator's role in the namespaces it serves (ClusterRole or Role). */}}
{{- define "hookline.watchRules" -}}
- apiGroups: ["hookline.dev"]
  resources: ["webhooksubscriptions"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["hookline.dev"]
  resources: ["webhooksubscriptions/status"]
  verbs: ["patch"]
{{- /* create: the publish door makes deliveries; stream mode makes its dead letters. */}}
- apiGroups: ["hookline.dev"]
  resources: ["webhookdeliveries"]
  verbs: ["get", "list", "watch", "patch", "delete"{{ if or .Values.publish.enabled .Values.stream.natsUrl .Values.stream.natsUrlSecret.name }}, "create"{{ end }}]
- apiGroups: ["hookline.dev"]
  resources: ["webhookdeliveries/status"]
  verbs: ["patch"]
- apiGroups: ["hookline.dev"]
  resources: ["webhookreplays"]
  verbs: ["list", "watch"]
- apiGroups: ["hookline.dev"]
  resources: ["webhookreplays/status"]
  verbs: ["patch"]
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
{{- end }}

{{/*
Node's heap limit in MiB: 75% of resources.limits.memory (the rest is for buffers, code and
native memory), so the collector works before the kernel's OOM killer does. Empty without a
memory limit. Understands plain bytes and the suffixes k/K, M, G, T, Ki, Mi, Gi, Ti.
*/}}
{{- define "hookline.heapLimitMiB" -}}
{{- $raw := dig "limits" "memory" "" (.Values.resources | default dict) }}
{{- if $raw }}
{{- $bytes := 0.0 }}
{{- if kindIs "string" $raw }}
{{- $num := regexFind "^[0-9]+(\\.[0-9]+)?" $raw }}
{{- $unit := trimPrefix $num $raw }}
{{- $factors := dict "" 1.0 "k" 1e3 "K" 1e3 "M" 1e6 "G" 1e9 "T" 1e12 "Ki" 1024.0 "Mi" 1048576.0 "Gi" 1073741824.0 "Ti" 1099511627776.0 }}
{{- if or (not $num) (not (hasKey $factors $unit)) }}
{{- fail (printf "resources.limits.memory %q: expected a number of bytes with an optional suffix k, M, G, T, Ki, Mi, Gi or Ti" $raw) }}
{{- end }}
{{- $bytes = mulf (float64 $num) (get $factors $unit) }}
{{- else }}
{{- $bytes = float64 $raw }}
{{- end }}
{{- divf (mulf $bytes 0.75) 1048576.0 | floor | int64 }}
{{- end }}
{{- end }}
