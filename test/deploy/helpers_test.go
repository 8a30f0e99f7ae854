package deploy_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	chart "helm.sh/helm/v4/pkg/chart/v2"

	"github.com/quotaplane/quotaplane/test/deploy"
)

// testRelease is where the tests render the chart: a release name that is
// not the chart's, so names carry both.
var testRelease = deploy.Release{Name: "qp", Namespace: "qp-system"}

const (
	webhookName      = "qp-quotaplane-webhook"
	controllerName   = "qp-quotaplane-controller"
	tlsSecretName    = "qp-quotaplane-webhook-tls"
	testClusterName  = "test-cluster"
	kubeconfigSecret = "qp-kubeconfig"
)

// memberValues are the least the webhook needs, plus overrides.
func memberValues(overrides map[string]any) map[string]any {
	v := map[string]any{
		"clusterName": testClusterName,
		"quotaPlane":  map[string]any{"kubeconfigSecret": kubeconfigSecret},
	}
	for k, o := range overrides {
		v[k] = o
	}
	return v
}

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := deploy.LoadChart()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func render(t *testing.T, values map[string]any) rendered {
	t.Helper()
	objs, err := deploy.Render(loadChart(t), testRelease, values, nil)
	if err != nil {
		t.Fatalf("rendering with %v: %v", values, err)
	}
	return rendered(objs)
}

// rendered is what one render made.
type rendered []deploy.Object

// find returns the object of kind and name; the test fails without one.
func (r rendered) find(t *testing.T, kind, name string) deploy.Object {
	t.Helper()
	for _, o := range r {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s among the rendered objects: %s", kind, name, r)
	return deploy.Object{}
}

func (r rendered) has(kind, name string) bool {
	return slices.ContainsFunc(r, func(o deploy.Object) bool { return o.GetKind() == kind && o.GetName() == name })
}

func (r rendered) kinds() []string {
	var ks []string
	for _, o := range r {
		ks = append(ks, o.GetKind())
	}
	return ks
}

func (r rendered) String() string {
	var names []string
	for _, o := range r {
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	return strings.Join(names, ", ")
}

// typed decodes o strictly: a field the type does not have fails the test,
// as it would fail a strict server-side apply.
func typed[T any](t *testing.T, o deploy.Object) *T {
	t.Helper()
	out := new(T)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, out, true); err != nil {
		t.Fatalf("%s %s (%s) does not decode strictly: %v", o.GetKind(), o.GetName(), o.Source, err)
	}
	return out
}

func (r rendered) deployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	return typed[appsv1.Deployment](t, r.find(t, "Deployment", name))
}

func (r rendered) webhookConfiguration(t *testing.T) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	return typed[admissionregistrationv1.ValidatingWebhookConfiguration](t, r.find(t, "ValidatingWebhookConfiguration", "quotaplane-"+testClusterName))
}

// checkPodSecurity checks the security invariants of every pod the chart
// runs: non-root as 65532, read-only root, no privilege escalation, no
// capabilities, the runtime's seccomp profile, requests and limits.
func checkPodSecurity(t *testing.T, d *appsv1.Deployment) {
	t.Helper()
	errorf := func(format string, args ...any) { t.Errorf("Deployment %s: %s", d.Name, fmt.Sprintf(format, args...)) }
	pod := d.Spec.Template.Spec.SecurityContext
	if pod == nil || pod.RunAsNonRoot == nil || !*pod.RunAsNonRoot || pod.RunAsUser == nil || *pod.RunAsUser != 65532 {
		errorf("pod securityContext %+v; want runAsNonRoot and runAsUser 65532", pod)
	}
	if pod == nil || pod.SeccompProfile == nil || pod.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		errorf("pod seccompProfile is not RuntimeDefault")
	}
	if len(d.Spec.Template.Spec.InitContainers) != 0 {
		errorf("has init containers; check their security too")
	}
	for _, c := range d.Spec.Template.Spec.Containers {
		sc := c.SecurityContext
		switch {
		case sc == nil:
			errorf("container %s has no securityContext", c.Name)
			continue
		case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser != 65532:
			errorf("container %s does not run as non-root 65532", c.Name)
		case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
			errorf("container %s: root filesystem not read-only", c.Name)
		case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
			errorf("container %s allows privilege escalation", c.Name)
		case sc.Privileged != nil && *sc.Privileged:
			errorf("container %s is privileged", c.Name)
		case sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(sc.Capabilities.Add) != 0:
			errorf("container %s capabilities %+v; want drop ALL and add none", c.Name, sc.Capabilities)
		case sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault:
			errorf("container %s seccompProfile is not RuntimeDefault", c.Name)
		}
		for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if _, ok := c.Resources.Requests[r]; !ok {
				errorf("container %s requests no %s", c.Name, r)
			}
			if _, ok := c.Resources.Limits[r]; !ok {
				errorf("container %s has no %s limit", c.Name, r)
			}
		}
	}
}
