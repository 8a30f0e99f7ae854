package deploy_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	api "k8s.io/kubernetes/pkg/apis/core"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	"k8s.io/kubernetes/pkg/apis/policy"
	_ "k8s.io/kubernetes/pkg/apis/policy/install"
	servicestrategy "k8s.io/kubernetes/pkg/registry/core/service"
	pdbstrategy "k8s.io/kubernetes/pkg/registry/policy/poddisruptionbudget"
	"sigs.k8s.io/yaml"

	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/internal/webhook"
	"github.com/quotaplane/quotaplane/internal/webhook/setup"
	"github.com/quotaplane/quotaplane/test/deploy"
)

// notServed are kinds quotaplane serve does not serve (it has no Services
// nor disruption budgets, having no nodes): they are checked with upstream's
// own defaulting and validation instead, as the API server would before
// storing them.
var notServed = map[string]func(*unstructured.Unstructured) field.ErrorList{
	"Service":             validateService,
	"PodDisruptionBudget": validatePodDisruptionBudget,
}

// TestChartAppliesToServer applies what the chart renders — the CRDs, the
// webhook with a generated certificate and the controller — and the plain
// manifests, with server-side apply, to a quotaplane server standing in for
// the cluster, then reads back the webhook configuration and Deployments.
// A render that looks the certificate up on that server (as helm upgrade
// does) keeps it, and `quotaplane webhook print-config` applied over the
// plain manifests' configuration changes only its caBundle and rules.
func TestChartAppliesToServer(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the server")
	}
	// The chart is for clusters that run quotaplane controller, where the
	// quota kinds are CRDs: a serve serving them as CRDs stands for one (a
	// native serve refuses quota CRDs).
	srv, err := testserver.Start(testserver.Options{CRDStorage: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	a := &applier{t: t, dyn: dynamic.NewForConfigOrDie(srv.Config),
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))}

	c := loadChart(t)
	crds, err := deploy.CRDs(c)
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) == 0 {
		t.Fatal("the chart has no CRDs")
	}
	// serve installs its own variant of some CRDs (amounts that accept
	// quantities), as Helm would find them installed and leave them: the
	// chart's are checked by a dry run, forced over serve's.
	a.apply(ctx, "helm", crds, metav1.ApplyOptions{DryRun: []string{metav1.DryRunAll}, Force: true})

	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testRelease.Namespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	values := memberValues(map[string]any{"controller": map[string]any{"enabled": true}, "webhook": map[string]any{
		"rules": []any{map[string]any{"apiGroups": []any{"apps"}, "apiVersions": []any{"v1"}, "operations": []any{"CREATE"}, "resources": []any{"statefulsets"}}},
	}})
	objs, err := deploy.Render(c, testRelease, values, nil)
	if err != nil {
		t.Fatal(err)
	}
	a.apply(ctx, "helm", objs, metav1.ApplyOptions{})

	// Read back what the API server stored.
	vwc, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "quotaplane-"+testClusterName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("reading the webhook configuration back: %v", err)
	}
	checkWebhookConfiguration(t, vwc)
	secret, err := kube.CoreV1().Secrets(testRelease.Namespace).Get(ctx, tlsSecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if string(vwc.Webhooks[0].ClientConfig.CABundle) != string(secret.Data["ca.crt"]) {
		t.Error("the stored caBundle is not the stored Secret's ca.crt")
	}
	for _, name := range []string{webhookName, controllerName} {
		d, err := kube.AppsV1().Deployments(testRelease.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("reading Deployment %s back: %v", name, err)
		}
		checkPodSecurity(t, d)
	}

	// An upgrade's render looks the Secret up and keeps the certificate.
	again, err := deploy.Render(c, testRelease, values, srv.Config)
	if err != nil {
		t.Fatalf("rendering with lookup: %v", err)
	}
	kept := typed[corev1.Secret](t, rendered(again).find(t, "Secret", tlsSecretName))
	for _, key := range []string{"ca.crt", "tls.crt", "tls.key"} {
		if string(kept.Data[key]) != string(secret.Data[key]) {
			t.Errorf("a render that looks up the cluster changed %s of the existing certificate", key)
		}
	}
	if got := rendered(again).webhookConfiguration(t).Webhooks[0].ClientConfig.CABundle; string(got) != string(secret.Data["ca.crt"]) {
		t.Error("a render that looks up the cluster changed caBundle")
	}
	a.apply(ctx, "helm", again, metav1.ApplyOptions{})

	// The plain manifests, as kubectl apply --server-side would.
	plain := readManifests(t)
	a.apply(ctx, "kubectl", plain, metav1.ApplyOptions{})
	if _, err := kube.AppsV1().Deployments(deploy.ManifestRelease.Namespace).Get(ctx, "quotaplane-webhook", metav1.GetOptions{}); err != nil {
		t.Errorf("the plain manifests' Deployment: %v", err)
	}
	plainVWC, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "quotaplane-member", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the plain manifests' webhook configuration: %v", err)
	}

	// What the README says next: print-config's configuration (this server
	// stands in for the quota plane too) applied over the rendered one. It
	// must be the same webhook, with a caBundle (and rules) added.
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, secret.Data["ca.crt"], 0o600); err != nil {
		t.Fatal(err)
	}
	o, co := webhook.NewOptions(), setup.NewConfigOptions()
	o.QuotaKubeconfig, o.Kubeconfig, o.ClusterName, co.CAFile = srv.Kubeconfig, srv.Kubeconfig, "member", caFile
	var printed bytes.Buffer
	if err := setup.PrintConfig(ctx, o, co, &printed); err != nil {
		t.Fatalf("print-config: %v", err)
	}
	p := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(printed.Bytes(), &p.Object); err != nil {
		t.Fatal(err)
	}
	a.apply(ctx, "kubectl", []deploy.Object{{Source: "print-config", Unstructured: p}}, metav1.ApplyOptions{})
	applied, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "quotaplane-member", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := plainVWC.Webhooks[0].DeepCopy()
	want.ClientConfig.CABundle, want.Rules = secret.Data["ca.crt"], applied.Webhooks[0].Rules
	if diff := cmp.Diff(*want, applied.Webhooks[0]); diff != "" {
		t.Errorf("print-config's webhook differs from the chart's beyond caBundle and rules (-chart +print-config):\n%s", diff)
	}
}

// applier applies objects with server-side apply through the dynamic client.
type applier struct {
	t      *testing.T
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
}

func (a *applier) apply(ctx context.Context, manager string, objs []deploy.Object, opts metav1.ApplyOptions) {
	a.t.Helper()
	opts.FieldManager = manager
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		what := fmt.Sprintf("%s %s (%s)", gvk.Kind, o.GetName(), o.Source)
		if validate, ok := notServed[gvk.Kind]; ok {
			if _, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); !meta.IsNoMatchError(err) {
				a.t.Errorf("%s: the server now serves %s (mapping error %v): apply it instead of validating it here", what, gvk, err)
			}
			if errs := validate(o.Unstructured); len(errs) > 0 {
				a.t.Errorf("%s would be refused: %v", what, errs.ToAggregate())
			}
			continue
		}
		mapping, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			// A CRD applied just now: discovery catches up.
			a.mapper.Reset()
			mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		}
		if err != nil {
			a.t.Errorf("%s: %v", what, err)
			continue
		}
		var client dynamic.ResourceInterface = a.dyn.Resource(mapping.Resource)
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			if o.GetNamespace() == "" {
				a.t.Errorf("%s is namespaced but names no namespace: kubectl apply would put it in the current one", what)
				continue
			}
			client = a.dyn.Resource(mapping.Resource).Namespace(o.GetNamespace())
		}
		if _, err := client.Apply(ctx, o.GetName(), o.Unstructured, opts); err != nil {
			a.t.Errorf("applying %s: %v", what, err)
		}
	}
}

// readManifests parses deploy/manifests/quotaplane.yaml.
func readManifests(t *testing.T) []deploy.Object {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(deploy.Root, "deploy", "manifests", "quotaplane.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var objs []deploy.Object
	for _, doc := range strings.Split(string(data), "\n---\n") {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
			t.Fatalf("deploy/manifests/quotaplane.yaml: %v", err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, deploy.Object{Source: "deploy/manifests/quotaplane.yaml", Text: doc, Unstructured: u})
		}
	}
	if len(objs) == 0 || objs[0].GetKind() != "Namespace" {
		t.Fatalf("deploy/manifests/quotaplane.yaml does not start with its Namespace: %v", rendered(objs))
	}
	return objs
}

// validateService defaults, converts and validates a Service as the API
// server does on create, with the cluster IP its allocator would give.
func validateService(u *unstructured.Unstructured) field.ErrorList {
	svc := &corev1.Service{}
	internal := &api.Service{}
	if errs := toInternal(u, svc, internal); errs != nil {
		return errs
	}
	if internal.Spec.Type == api.ServiceTypeClusterIP && internal.Spec.ClusterIP == "" {
		single := api.IPFamilyPolicySingleStack
		internal.Spec.ClusterIP, internal.Spec.ClusterIPs = "10.96.0.10", []string{"10.96.0.10"}
		internal.Spec.IPFamilies, internal.Spec.IPFamilyPolicy = []api.IPFamily{api.IPv4Protocol}, &single
	}
	return beforeCreate(servicestrategy.Strategy, u.GetNamespace(), internal)
}

// validatePodDisruptionBudget validates a PodDisruptionBudget as the API
// server does on create.
func validatePodDisruptionBudget(u *unstructured.Unstructured) field.ErrorList {
	pdb := &policyv1.PodDisruptionBudget{}
	internal := &policy.PodDisruptionBudget{}
	if errs := toInternal(u, pdb, internal); errs != nil {
		return errs
	}
	return beforeCreate(pdbstrategy.Strategy, u.GetNamespace(), internal)
}

// toInternal decodes u strictly into external, defaults it and converts it
// to internal.
func toInternal(u *unstructured.Unstructured, external, internal runtime.Object) field.ErrorList {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, external, true); err != nil {
		return field.ErrorList{field.Invalid(nil, u.GetName(), err.Error())}
	}
	legacyscheme.Scheme.Default(external)
	if err := legacyscheme.Scheme.Convert(external, internal, nil); err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	return nil
}

// beforeCreate runs the registry strategy's create checks as the create
// handler does: system metadata filled in, then PrepareForCreate and
// Validate.
func beforeCreate(strategy rest.RESTCreateStrategy, namespace string, obj runtime.Object) field.ErrorList {
	ctx := genericapirequest.WithNamespace(context.Background(), namespace)
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return field.ErrorList{field.InternalError(nil, err)}
	}
	rest.FillObjectMetaSystemFields(accessor)
	if err := rest.BeforeCreate(strategy, ctx, obj); err != nil {
		return field.ErrorList{field.Invalid(nil, namespace, err.Error())}
	}
	return nil
}

// TestNotServedValidationRefuses: the stand-in validation of the kinds serve
// does not serve refuses what the API server would.
func TestNotServedValidationRefuses(t *testing.T) {
	for _, tc := range []struct {
		kind, doc string
	}{
		{"Service", "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: n}\nspec: {ports: [{port: 0}]}"},
		{"Service", "apiVersion: v1\nkind: Service\nmetadata: {name: s, namespace: n}\nspec: {portz: []}"},
		{"PodDisruptionBudget", "apiVersion: policy/v1\nkind: PodDisruptionBudget\nmetadata: {name: p, namespace: n}\nspec: {minAvailable: -1}"},
	} {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(tc.doc), &u.Object); err != nil {
			t.Fatal(err)
		}
		if errs := notServed[tc.kind](u); len(errs) == 0 {
			t.Errorf("accepted: %s", tc.doc)
		}
	}
}
