{{/*
Names and labels shared by every template of the chart.
*/}}

{{/* The chart's name, overridable with nameOverride. */}}
{{- define "quotaplane.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The prefix of every namespaced object: the release name, with the chart's name when the release's does not hold it. */}}
{{- define "quotaplane.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := include "quotaplane.name" . -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "quotaplane.webhook.name" -}}
{{- printf "%s-webhook" (include "quotaplane.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "quotaplane.controller.name" -}}
{{- printf "%s-controller" (include "quotaplane.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Secret holding the webhook's serving certificate. */}}
{{- define "quotaplane.webhook.tlsSecret" -}}
{{- printf "%s-tls" (include "quotaplane.webhook.name" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The webhook Service's DNS names, as its certificate must name them. */}}
{{- define "quotaplane.webhook.dnsNames" -}}
{{- $svc := include "quotaplane.webhook.name" . -}}
{{- list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) | toJson -}}
{{- end -}}

{{- define "quotaplane.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "quotaplane.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: quotaplane
{{- end -}}

{{/* Selector labels of one component: include with (dict "ctx" . "component" "webhook"). */}}
{{- define "quotaplane.selectorLabels" -}}
app.kubernetes.io/name: {{ include "quotaplane.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "quotaplane.componentLabels" -}}
{{ include "quotaplane.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "quotaplane.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{/* The controller's system namespace. */}}
{{- define "quotaplane.controller.systemNamespace" -}}
{{- .Values.controller.systemNamespace | default .Release.Namespace -}}
{{- end -}}

{{/*
Pod and container security: non-root (65532, the image's user), read-only
root filesystem, no privilege escalation, no capabilities, the runtime's
default seccomp profile. Pods pass the restricted Pod Security Standard.
*/}}
{{- define "quotaplane.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "quotaplane.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
privileged: false
capabilities:
  drop: ["ALL"]
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* Fails rendering, saying what to set, when the webhook lacks what it needs. */}}
{{- define "quotaplane.webhook.validate" -}}
{{- if .Values.webhook.enabled -}}
{{- if not .Values.clusterName -}}
{{- fail "clusterName is empty: the webhook needs the name the quota plane knows this cluster by. Set it (--set clusterName=<name>), or disable the webhook (--set webhook.enabled=false)." -}}
{{- end -}}
{{- if or (not (regexMatch "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$" .Values.clusterName)) (gt (len .Values.clusterName) 55) -}}
{{- fail (printf "clusterName %q is not a DNS label of at most 55 characters (lower-case letters, digits and '-'), as the quota plane requires of a member cluster's name (its namespace there is cluster-<name>). Set another one: --set clusterName=<name>." .Values.clusterName) -}}
{{- end -}}
{{- if not .Values.quotaPlane.kubeconfigSecret -}}
{{- fail "quotaPlane.kubeconfigSecret is empty: the webhook needs a Secret in the release namespace holding the quota plane's kubeconfig under the key \"kubeconfig\". Create one (kubectl create secret generic quota-plane-kubeconfig --from-file=kubeconfig=<file>) and set quotaPlane.kubeconfigSecret to its name, or disable the webhook (--set webhook.enabled=false)." -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The webhook's generated certificates as YAML {ca, crt, key} (PEM), or {}
when Helm makes none (cert-manager, certificates.generate false, webhook
off). An existing Secret is kept (lookup), so upgrades change nothing;
otherwise a CA and a serving certificate for the Service's names are made.
Made once per render and kept in .Values, so that the Secret, the caBundle
and the Deployment's checksum agree.
*/}}
{{- define "quotaplane.webhook.certificates" -}}
{{- if and .Values.webhook.enabled (not .Values.certManager.enabled) .Values.certificates.generate -}}
{{- if not (hasKey .Values "__quotaplaneGeneratedCertificates") -}}
{{- $days := int .Values.certificates.validityDays -}}
{{- $certs := dict -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (include "quotaplane.webhook.tlsSecret" .) -}}
{{- $data := dig "data" dict $secret -}}
{{- if and (index $data "ca.crt") (index $data "tls.crt") (index $data "tls.key") -}}
{{- $certs = dict "ca" (index $data "ca.crt" | b64dec) "crt" (index $data "tls.crt" | b64dec) "key" (index $data "tls.key" | b64dec) -}}
{{- else -}}
{{- $ca := genCA (printf "%s-ca" (include "quotaplane.webhook.name" .)) $days -}}
{{- $names := include "quotaplane.webhook.dnsNames" . | fromJsonArray -}}
{{- $cert := genSignedCert (printf "%s.%s.svc" (include "quotaplane.webhook.name" .) .Release.Namespace) nil $names $days $ca -}}
{{- $certs = dict "ca" $ca.Cert "crt" $cert.Cert "key" $cert.Key -}}
{{- end -}}
{{- $_ := set .Values "__quotaplaneGeneratedCertificates" $certs -}}
{{- end -}}
{{- toYaml (get .Values "__quotaplaneGeneratedCertificates") -}}
{{- else -}}
{{- dict | toYaml -}}
{{- end -}}
{{- end -}}
