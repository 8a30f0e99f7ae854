package setup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/clientconfig"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/webhook"
)

// scheme reads the quota plane's policies.
func scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(quotav1alpha1.AddToScheme(s))
	return s
}

// ConfigOptions say how the member's API server reaches the webhook.
type ConfigOptions struct {
	// URL reaches the webhook directly (https://host:port/validate); else
	// ServiceNamespace/ServiceName:ServicePort does.
	URL                           string
	ServiceNamespace, ServiceName string
	ServicePort                   int32
	// CAFile is the CA that signed the webhook's serving certificate.
	CAFile string
	// ExcludeNamespaces are left alone besides the system's own.
	ExcludeNamespaces []string
	// TimeoutSeconds is how long the API server waits for an answer.
	TimeoutSeconds int32
	// KubeconfigSecret is the webhook's --quota-kubeconfig-secret
	// (<namespace>/<name>); when given, a Role and RoleBinding letting
	// ServiceAccount (<namespace>/<name>, by default the Service's
	// namespace and name, as the chart names both) get and update it are
	// printed too.
	KubeconfigSecret, ServiceAccount string
}

// NewConfigOptions are the defaults: the chart's Service.
func NewConfigOptions() *ConfigOptions {
	return &ConfigOptions{ServiceNamespace: "quotaplane-system", ServiceName: "quotaplane-webhook", ServicePort: 443,
		ExcludeNamespaces: []string{"quotaplane-system"}, TimeoutSeconds: 10}
}

// PrintConfig writes the ValidatingWebhookConfiguration that registers the
// webhook in the member cluster: one rule per kind a Ready policy of the
// quota plane governs (creates, updates and scale).
func PrintConfig(ctx context.Context, o *webhook.Options, c *ConfigOptions, out io.Writer) error {
	if err := members.ValidateName(o.ClusterName); err != nil {
		return fmt.Errorf("--cluster-name: %w", err)
	}
	if o.QuotaKubeconfig == "" {
		return errors.New("--quota-kubeconfig is required: the webhook's rules are the kinds the quota plane's Ready ClaimCreationPolicies govern")
	}
	caFile := c.CAFile
	if caFile == "" {
		caFile = filepath.Join(o.CertDir, "tls.crt")
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("reading the CA bundle (--ca-file, else the generated certificate in --cert-dir): %w", err)
	}
	qcfg, err := o.QuotaConfig()
	if err != nil {
		return err
	}
	qc, err := client.New(qcfg, client.Options{Scheme: scheme()})
	if err != nil {
		return err
	}
	list := &quotav1alpha1.ClaimCreationPolicyList{}
	if err := qc.List(ctx, list); err != nil {
		return fmt.Errorf("listing the quota plane's ClaimCreationPolicies: %w", err)
	}
	var mapper apimeta.RESTMapper
	if mcfg, err := clientconfig.Load(o.Kubeconfig); err == nil {
		if kc, err := kubernetes.NewForConfig(mcfg); err == nil {
			mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kc.Discovery()))
		}
	}
	objs := []runtime.Object{webhookConfig(o.ClusterName, list.Items, mapper, c, ca)}
	if c.KubeconfigSecret != "" {
		access, err := secretAccess(o.ClusterName, c)
		if err != nil {
			return err
		}
		objs = append(objs, access...)
	}
	return writeYAML(out, objs)
}

// secretAccess is the Role and RoleBinding of the member cluster letting
// the webhook's service account get and update its kubeconfig Secret, and
// nothing else: it writes each refreshed token there.
func secretAccess(cluster string, c *ConfigOptions) ([]runtime.Object, error) {
	ns, name, ok := strings.Cut(c.KubeconfigSecret, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return nil, fmt.Errorf("--quota-kubeconfig-secret %q: give it as <namespace>/<name>, as to the webhook", c.KubeconfigSecret)
	}
	sa := c.ServiceAccount
	if sa == "" {
		sa = c.ServiceNamespace + "/" + c.ServiceName
	}
	saNS, saName, ok := strings.Cut(sa, "/")
	if !ok || saNS == "" || saName == "" || strings.Contains(saName, "/") {
		return nil, fmt.Errorf("--service-account %q: give it as <namespace>/<name>, the webhook's service account in this cluster", sa)
	}
	role := "quotaplane-" + cluster + "-kubeconfig"
	labels := map[string]string{members.Label: cluster}
	return []runtime.Object{
		&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: ns, Labels: labels},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{name}, Verbs: []string{"get", "update"}}}},
		&rbacv1.RoleBinding{TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: role, Namespace: ns, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: saNS, Name: saName}}},
	}, nil
}

// webhookConfig builds the configuration: rules from the Ready policies,
// the member's own resource names where it can say them.
func webhookConfig(cluster string, policies []quotav1alpha1.ClaimCreationPolicy, mapper apimeta.RESTMapper, c *ConfigOptions, ca []byte) *admissionregistrationv1.ValidatingWebhookConfiguration {
	resources := map[string]map[string]bool{}
	for _, p := range policies {
		if p.Spec.Disabled || !apimeta.IsStatusConditionTrue(p.Status.Conditions, "Ready") {
			continue
		}
		gv, err := schema.ParseGroupVersion(p.Spec.Trigger.Resource.APIVersion)
		if err != nil {
			continue
		}
		gk := schema.GroupKind{Group: gv.Group, Kind: p.Spec.Trigger.Resource.Kind}
		plural, _ := apimeta.UnsafeGuessKindToResource(gv.WithKind(gk.Kind))
		if mapper != nil {
			if m, err := mapper.RESTMapping(gk); err == nil {
				plural = m.Resource
			}
		}
		if resources[gv.Group] == nil {
			resources[gv.Group] = map[string]bool{}
		}
		resources[gv.Group][plural.Resource] = true
	}
	var rules []admissionregistrationv1.RuleWithOperations
	groups := make([]string, 0, len(resources))
	for g := range resources {
		groups = append(groups, g)
	}
	sort.Strings(groups)
	for _, g := range groups {
		var rs []string
		for r := range resources[g] {
			rs = append(rs, r, r+"/scale")
		}
		sort.Strings(rs)
		rules = append(rules, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule:       admissionregistrationv1.Rule{APIGroups: []string{g}, APIVersions: []string{"*"}, Resources: rs, Scope: ptr.To(admissionregistrationv1.AllScopes)},
		})
	}
	cc := admissionregistrationv1.WebhookClientConfig{CABundle: ca}
	if c.URL != "" {
		cc.URL = ptr.To(c.URL)
	} else {
		cc.Service = &admissionregistrationv1.ServiceReference{Namespace: c.ServiceNamespace, Name: c.ServiceName, Path: ptr.To("/validate"), Port: ptr.To(c.ServicePort)}
	}
	excluded := append(append([]string{}, members.SystemNamespaces...), c.ExcludeNamespaces...)
	return &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: "quotaplane-" + cluster, Labels: map[string]string{members.Label: cluster}},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "quota.miloapis.com",
			ClientConfig:            cc,
			Rules:                   rules,
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			MatchPolicy:             ptr.To(admissionregistrationv1.Equivalent),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNoneOnDryRun),
			TimeoutSeconds:          ptr.To(c.TimeoutSeconds),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: excluded,
			}}},
		}},
	}
}
