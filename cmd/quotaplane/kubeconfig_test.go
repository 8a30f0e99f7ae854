package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestKubeconfigForAServiceAccount: `quotaplane kubeconfig --service-account`
// prints a kubeconfig whose user is a token of that service account, at the
// root and in an organization's plane; a service account that does not
// exist, a malformed name and a duration the server would refuse are errors
// that say what to do, and print nothing.
func TestKubeconfigForAServiceAccount(t *testing.T) {
	testserver.Quiet()
	eo := quotatest.FastEngineOptions()
	srv, err := testserver.Start(testserver.Options{Engine: &eo})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin := kubernetes.NewForConfigOrDie(srv.Config)
	must(t, createObject(ctx, admin.CoreV1().Namespaces().Create, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenants"}}))
	must(t, createObject(ctx, admin.CoreV1().ServiceAccounts("tenants").Create, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot"}}))

	run := func(args ...string) (string, error) {
		root := newRootCommand()
		var out, errOut bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&errOut)
		root.SetArgs(append([]string{"kubeconfig", "--kubeconfig", srv.Kubeconfig}, args...))
		err := root.ExecuteContext(ctx)
		return out.String(), err
	}
	// whoami reads the kubeconfig as kubectl would and asks the server who
	// its user is (kubectl auth whoami's SelfSubjectReview).
	whoami := func(kubeconfig string) (string, string) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "kubeconfig")
		must(t, os.WriteFile(path, []byte(kubeconfig), 0o600))
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		must(t, err)
		if cfg.CertData != nil || cfg.CertFile != "" {
			t.Errorf("the kubeconfig keeps the admin's client certificate:\n%s", kubeconfig)
		}
		r, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		must(t, err)
		return r.Status.UserInfo.Username, cfg.Host
	}

	out, err := run("--service-account", "tenants/robot")
	must(t, err)
	if user, host := whoami(out); user != "system:serviceaccount:tenants:robot" || host != srv.Config.Host {
		t.Errorf("at the root: user %q at %s; want system:serviceaccount:tenants:robot at %s", user, host, srv.Config.Host)
	}

	// In an organization's plane, as its owner.
	dyn := dynamic.NewForConfigOrDie(srv.Config)
	org := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "resourcemanager.miloapis.com/v1alpha1", "kind": "Organization",
		"metadata": map[string]any{"name": "kc-acme"}, "spec": map[string]any{"type": "Standard"},
	}}
	_, err = dyn.Resource(schema.GroupVersionResource{Group: planes.Group, Version: planes.Version, Resource: "organizations"}).Create(ctx, org, metav1.CreateOptions{})
	must(t, err)
	must(t, wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := admin.CoreV1().Namespaces().Get(ctx, "organization-kc-acme", metav1.GetOptions{})
		return err == nil, nil
	}))
	must(t, createObject(ctx, admin.RbacV1().RoleBindings("organization-kc-acme").Create, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "robot-owner"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: "tenants", Name: "robot"}},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quotaplane-organization-owner"},
	}))
	// RBAC authorizes from a cache: act as the robot once it has the binding.
	quotatest.WaitBound(t, admin, "system:serviceaccount:tenants:robot", []string{"system:serviceaccounts", "system:serviceaccounts:tenants"},
		"quotaplane-organization-owner", "organization-kc-acme")
	out, err = run("--service-account", "tenants/robot", "--organization", "kc-acme")
	must(t, err)
	plane := planes.Plane{Kind: planes.Organizations, Name: "kc-acme"}
	if user, host := whoami(out); user != "system:serviceaccount:tenants:robot" || host != srv.Config.Host+plane.Path() {
		t.Errorf("in the plane: user %q at %s; want system:serviceaccount:tenants:robot at %s", user, host, srv.Config.Host+plane.Path())
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--service-account", "tenants/nosuch"}, []string{"no service account nosuch in namespace tenants", "kubectl create serviceaccount nosuch -n tenants"}},
		{[]string{"--service-account", "nosuch-ns/robot"}, []string{"no service account robot in namespace nosuch-ns"}},
		{[]string{"--service-account", "robot"}, []string{`--service-account "robot": want <namespace>/<name>`}},
		{[]string{"--service-account", "tenants/robot/x"}, []string{"want <namespace>/<name>"}},
		{[]string{"--service-account", "tenants/robot", "--duration", "1m"}, []string{"--duration 1m0s is shorter than the 10m0s"}},
	} {
		out, err := run(tc.args...)
		if err == nil || out != "" {
			t.Errorf("kubeconfig %v: err %v, printed %q; want an error and nothing printed", tc.args, err, out)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("kubeconfig %v: %q does not say %q", tc.args, err, w)
			}
		}
	}

	// Neither a plane nor an account: the current context whole (in a
	// chart's pod, the admin kubeconfig, the image having no shell), with
	// --server naming another address its certificate covers.
	adminOf := func(kubeconfig string) (string, string) {
		t.Helper()
		cfg, err := clientcmd.RESTConfigFromKubeConfig([]byte(kubeconfig))
		must(t, err)
		r, err := kubernetes.NewForConfigOrDie(cfg).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		must(t, err)
		return r.Status.UserInfo.Username, cfg.Host
	}
	out, err = run()
	must(t, err)
	if user, host := adminOf(out); user != "quotaplane-admin" || host != srv.Config.Host {
		t.Errorf("kubeconfig without a plane or an account: user %q at %s; want quotaplane-admin at %s", user, host, srv.Config.Host)
	}
	other := strings.Replace(srv.Config.Host, "127.0.0.1", "localhost", 1)
	out, err = run("--server", other)
	must(t, err)
	if user, host := adminOf(out); user != "quotaplane-admin" || host != other {
		t.Errorf("kubeconfig --server %s: user %q at %s; want quotaplane-admin at %s", other, user, host, other)
	}
}

func createObject[T any](ctx context.Context, create func(context.Context, T, metav1.CreateOptions) (T, error), obj T) error {
	_, err := create(ctx, obj, metav1.CreateOptions{})
	return err
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
