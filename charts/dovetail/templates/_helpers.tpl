{{/* Name of every object: fullnameOverride, else the release name alone, so that a
release named karpenter keeps the object names a Karpenter install had. */}}
{{- define "dovetail.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dovetail.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "dovetail.selectorLabels" -}}
app.kubernetes.io/name: {{ include "dovetail.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "dovetail.labels" -}}
{{ include "dovetail.selectorLabels" . }}
{{- with .Chart.AppVersion }}
app.kubernetes.io/version: {{ . | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ default .Release.Service .Values.managedBy }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end -}}
{{- end -}}

{{/* metadata.labels and, when there are any, metadata.annotations of every object. */}}
{{- define "dovetail.metadata" -}}
labels:
  {{- include "dovetail.labels" . | nindent 2 }}
{{- with .Values.additionalAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{- define "dovetail.serviceAccountName" -}}
{{- default (include "dovetail.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* A released chart's appVersion is the image's tag; the chart in the repository is
no release and has none, so it asks for one rather than guess. */}}
{{- define "dovetail.image" -}}
{{- $tag := default .Chart.AppVersion .Values.controller.image.tag -}}
{{- $digest := .Values.controller.image.digest -}}
{{- if and (not $tag) (not $digest) -}}
{{- fail "controller.image.tag is required: this chart is not a release (it has no appVersion), so it has no controller image of its own; set controller.image.repository and controller.image.tag (or digest) to the image you built from the repository's Dockerfile or mirrored, or install a released chart" -}}
{{- end -}}
{{- .Values.controller.image.repository }}{{ with $tag }}:{{ . }}{{ end -}}
{{- with $digest }}@{{ . }}{{ end -}}
{{- end -}}

{{/* "Key=value,..." in key order, as the controller's list settings read it. */}}
{{- define "dovetail.keyValues" -}}
{{- $parts := list -}}
{{- range $k, $v := . -}}
{{- $parts = append $parts (printf "%s=%v" $k $v) -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}

{{/* Karpenter's chart names feature gates in lowerCamelCase; the controller reads
them capitalised. */}}
{{- define "dovetail.featureGates" -}}
{{- $parts := list -}}
{{- range $k, $v := . -}}
{{- $parts = append $parts (printf "%s%s=%t" (substr 0 1 $k | upper) (substr 1 -1 $k) $v) -}}
{{- end -}}
{{- join "," $parts -}}
{{- end -}}

{{/* Terms and constraints that name no pods select the controller's own, so that
values.yaml can spread replicas without knowing the release name. */}}
{{- define "dovetail.withSelector" -}}
{{- $out := list -}}
{{- range .terms -}}
{{- if hasKey . "labelSelector" -}}
{{- $out = append $out . -}}
{{- else -}}
{{- $out = append $out (merge (dict "labelSelector" (dict "matchLabels" $.selector)) .) -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/* Karpenter's settings Dovetail takes only at the values that describe what it
does: any other value stops the render (and so a Terraform plan) with the fix, rather
than installing a controller that ignores it or refuses to start. The controller
checks the same settings when they reach it as env. */}}
{{- define "dovetail.refuseUnsupported" -}}
{{- $s := .Values.settings -}}
{{- if eq $s.preferencePolicy "Ignore" -}}
{{- fail "settings.preferencePolicy: Ignore is not supported yet; Dovetail holds preferred affinities and ScheduleAnyway spreads and relaxes them one at a time, as Karpenter's Respect does. Remove it or set Respect." -}}
{{- end -}}
{{- if eq $s.minValuesPolicy "BestEffort" -}}
{{- fail "settings.minValuesPolicy: BestEffort is not supported yet; minValues that cannot be met launch nothing, as Karpenter's Strict does. Remove it or set Strict." -}}
{{- end -}}
{{- if and (not (kindIs "invalid" $s.ignoreDRARequests)) (not $s.ignoreDRARequests) -}}
{{- fail "settings.ignoreDRARequests: false is not supported yet; Dovetail does not plan for pods' dynamic resource allocation claims. Remove it or set true." -}}
{{- end -}}
{{- if $s.enableDRA -}}
{{- fail "settings.enableDRA: true is not supported yet; Dovetail does not plan for pods' dynamic resource allocation claims. Remove it or set false." -}}
{{- end -}}
{{- $notYet := dict "podDeletionCostManagement" "managing ReplicaSet pods' pod-deletion-cost annotations" -}}
{{- range $gate, $what := $notYet -}}
{{- if or (index ($s.featureGates | default dict) $gate) (index ($s.featureGates | default dict) (printf "%s%s" (substr 0 1 $gate | upper) (substr 1 -1 $gate))) -}}
{{- fail (printf "settings.featureGates.%s: true is not supported yet; %s is not implemented. Remove it or set false." $gate $what) -}}
{{- end -}}
{{- end -}}
{{- $awsNotYet := dict "nodeClassCEL" "CEL expressions in an EC2NodeClass's kubelet settings are" "draNVIDIAGPU" "planning for the NVIDIA GPU driver's DRA devices is" "draEFA" "planning for the dranet driver's EFA devices is" -}}
{{- range $gate, $what := $awsNotYet -}}
{{- if index ($s.awsFeatureGates | default dict) $gate -}}
{{- fail (printf "settings.awsFeatureGates.%s: true is not supported yet; %s not implemented. Remove it or set false." $gate $what) -}}
{{- end -}}
{{- end -}}
{{- if $s.disableClusterStateObservability -}}
{{- fail "settings.disableClusterStateObservability: true is not supported yet; cluster state metrics are always exposed. Remove it or set false." -}}
{{- end -}}
{{- if $s.enableZonalShift -}}
{{- fail "settings.enableZonalShift: true is not supported yet; Dovetail does not avoid zones under an ARC zonal shift. Remove it or set false." -}}
{{- end -}}
{{- with $s.clusterCABundle -}}
{{- $pem := b64dec . -}}
{{- if not (contains "-----BEGIN CERTIFICATE-----" $pem) -}}
{{- fail "settings.clusterCABundle: not a base64-encoded PEM certificate; give it as `aws eks describe-cluster` prints certificateAuthority.data, or leave it empty to read it from EKS." -}}
{{- end -}}
{{- end -}}
{{- end -}}
