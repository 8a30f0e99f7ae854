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

{{/* The quota plane's objects: the replicas' StatefulSet and Service are <fullname>-plane, etcd's <fullname>-etcd. */}}
{{- define "quotaplane.plane.name" -}}
{{- printf "%s-plane" (include "quotaplane.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "quotaplane.etcd.name" -}}
{{- printf "%s-etcd" (include "quotaplane.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The Service's DNS names, which every replica's serving certificate carries (serve --tls-san). */}}
{{- define "quotaplane.plane.dnsNames" -}}
{{- $svc := include "quotaplane.plane.name" . -}}
{{- list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.cluster.local" $svc .Release.Namespace) | join "," -}}
{{- end -}}

{{/* The DNS name of etcd member i, for peers and clients: <etcd>-<i>.<etcd>.<namespace>.svc (the headless Service). */}}
{{- define "quotaplane.etcd.memberHost" -}}
{{- $etcd := include "quotaplane.etcd.name" .ctx -}}
{{- printf "%s-%d.%s.%s.svc" $etcd (int .i) $etcd .ctx.Release.Namespace -}}
{{- end -}}

{{/* serve's --etcd-servers: the members' client URLs, or the external ones. */}}
{{- define "quotaplane.etcd.servers" -}}
{{- if .Values.plane.etcd.managed -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.plane.etcd.replicas) -}}
{{- $urls = append $urls (printf "https://%s:2379" (include "quotaplane.etcd.memberHost" (dict "ctx" $ "i" $i))) -}}
{{- end -}}
{{- join "," $urls -}}
{{- else -}}
{{- join "," .Values.plane.etcd.external.servers -}}
{{- end -}}
{{- end -}}

{{/* The Secret with serve's etcd client credentials (ca.crt, tls.crt, tls.key), or "" for none. */}}
{{- define "quotaplane.etcd.clientSecret" -}}
{{- if .Values.plane.etcd.managed -}}
{{- printf "%s-client" (include "quotaplane.etcd.name" .) -}}
{{- else -}}
{{- .Values.plane.etcd.external.secretName -}}
{{- end -}}
{{- end -}}

{{/* Fails rendering, saying what to set, when the plane lacks what it needs. */}}
{{- define "quotaplane.plane.validate" -}}
{{- if .Values.plane.enabled -}}
{{- if lt (int .Values.plane.replicas) 1 -}}
{{- fail (printf "plane.replicas is %v: run at least one replica of serve (three ride out the loss of one)." .Values.plane.replicas) -}}
{{- end -}}
{{- if .Values.plane.etcd.managed -}}
{{- if or (lt (int .Values.plane.etcd.replicas) 1) (eq (mod (int .Values.plane.etcd.replicas) 2) 0) -}}
{{- fail (printf "plane.etcd.replicas is %v: give an odd number of etcd members (1, 3 or 5; three ride out the loss of one)." .Values.plane.etcd.replicas) -}}
{{- end -}}
{{- else if not .Values.plane.etcd.external.servers -}}
{{- fail "plane.etcd.managed is false and plane.etcd.external.servers is empty: give the client URLs of your etcd cluster (and its client credentials in plane.etcd.external.secretName), or set plane.etcd.managed=true for the chart to run one." -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
The material every replica shares, as YAML keyed by file name (PEM): the
CA, the service-account key and the peer CA, ECDSA keys as serve writes
them. An existing Secret is kept (lookup), so upgrades change nothing.
Made once per render and kept in .Values.
*/}}
{{- define "quotaplane.plane.pki" -}}
{{- if not (hasKey .Values "__quotaplanePlanePKI") -}}
{{- $secret := lookup "v1" "Secret" .Release.Namespace (printf "%s-pki" (include "quotaplane.plane.name" .)) -}}
{{- $data := dig "data" dict $secret -}}
{{- $pki := dict -}}
{{- if and (index $data "ca.crt") (index $data "ca.key") (index $data "service-account.key") (index $data "peer-ca.crt") (index $data "peer-ca.key") -}}
{{- range $k := list "ca.crt" "ca.key" "service-account.key" "peer-ca.crt" "peer-ca.key" -}}
{{- $_ := set $pki $k (index $data $k | b64dec) -}}
{{- end -}}
{{- else -}}
{{- $days := int .Values.plane.validityDays -}}
{{- $caKey := genPrivateKey "ecdsa" -}}
{{- $ca := genCAWithKey "quotaplane-ca" $days $caKey -}}
{{- $peerKey := genPrivateKey "ecdsa" -}}
{{- $peer := genCAWithKey "quotaplane-peer-ca" $days $peerKey -}}
{{- $pki = dict "ca.crt" $ca.Cert "ca.key" $caKey "service-account.key" (genPrivateKey "ecdsa") "peer-ca.crt" $peer.Cert "peer-ca.key" $peerKey -}}
{{- end -}}
{{- $_ := set .Values "__quotaplanePlanePKI" $pki -}}
{{- end -}}
{{- toYaml (get .Values "__quotaplanePlanePKI") -}}
{{- end -}}

{{/*
etcd's certificates, as YAML {ca, member: {crt, key}, client: {crt, key}}:
one CA, one certificate the members serve clients and peers with (every
member's name, and 127.0.0.1 for a member's own probes), one client
certificate for serve. Existing Secrets are kept (lookup).
*/}}
{{- define "quotaplane.etcd.pki" -}}
{{- if not (hasKey .Values "__quotaplaneEtcdPKI") -}}
{{- $etcd := include "quotaplane.etcd.name" . -}}
{{- $members := dig "data" dict (lookup "v1" "Secret" .Release.Namespace (printf "%s-pki" $etcd)) -}}
{{- $client := dig "data" dict (lookup "v1" "Secret" .Release.Namespace (printf "%s-client" $etcd)) -}}
{{- $pki := dict -}}
{{- if and (index $members "ca.crt") (index $members "tls.crt") (index $members "tls.key") (index $client "tls.crt") (index $client "tls.key") -}}
{{- $pki = dict "ca" (index $members "ca.crt" | b64dec) "member" (dict "crt" (index $members "tls.crt" | b64dec) "key" (index $members "tls.key" | b64dec)) "client" (dict "crt" (index $client "tls.crt" | b64dec) "key" (index $client "tls.key" | b64dec)) -}}
{{- else -}}
{{- $days := int .Values.plane.validityDays -}}
{{- $ca := genCA (printf "%s-ca" $etcd) $days -}}
{{- $names := list "localhost" (printf "*.%s.%s.svc" $etcd .Release.Namespace) (printf "*.%s.%s.svc.cluster.local" $etcd .Release.Namespace) -}}
{{- $member := genSignedCert $etcd (list "127.0.0.1") $names $days $ca -}}
{{- $cli := genSignedCert "quotaplane-serve" nil nil $days $ca -}}
{{- $pki = dict "ca" $ca.Cert "member" (dict "crt" $member.Cert "key" $member.Key) "client" (dict "crt" $cli.Cert "key" $cli.Key) -}}
{{- end -}}
{{- $_ := set .Values "__quotaplaneEtcdPKI" $pki -}}
{{- end -}}
{{- toYaml (get .Values "__quotaplaneEtcdPKI") -}}
{{- end -}}
