package apiserver

import (
	"github.com/quotaplane/quotaplane/internal/admission/delegation"
	"github.com/quotaplane/quotaplane/test/manifests"

	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// TestQuotaAPIServed checks that discovery lists the six quota kinds with the
// right scope, and that each can be created, read and deleted, together with
// a namespace and a secret.
func TestQuotaAPIServed(t *testing.T) {
	ctx := t.Context()
	kc, dc := clients(t, srv.Config)

	list, err := kc.Discovery().ServerResourcesForGroupVersion("quota.miloapis.com/v1alpha1")
	if err != nil {
		t.Fatalf("discovery of quota.miloapis.com/v1alpha1: %v", err)
	}
	wantNamespaced := map[string]bool{
		"ResourceRegistration": false, "ClaimCreationPolicy": false, "GrantCreationPolicy": false,
		"ResourceGrant": true, "ResourceClaim": true, "AllowanceBucket": true,
	}
	seen := sets.New[string]()
	for _, r := range list.APIResources {
		want, ok := wantNamespaced[r.Kind]
		if !ok || r.Name != quotaResources[r.Kind] {
			continue
		}
		seen.Insert(r.Kind)
		if r.Namespaced != want {
			t.Errorf("%s namespaced = %v, want %v", r.Kind, r.Namespaced, want)
		}
		if len(r.ShortNames) == 0 {
			t.Errorf("%s has no short names", r.Kind)
		}
	}
	if missing := sets.KeySet(wantNamespaced).Difference(seen); missing.Len() > 0 {
		t.Fatalf("discovery lacks %v", sets.List(missing))
	}

	ns := uniqueName("api")
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{delegation.PlatformNamespaceLabel: "true"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer kc.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{})
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns}, StringData: map[string]string{"k": "v"}}
	if _, err := kc.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, err := kc.CoreV1().Secrets(ns).Get(ctx, "s", metav1.GetOptions{}); err != nil || string(got.Data["k"]) != "v" {
		t.Fatalf("get secret = %v, %v", got, err)
	}
	if err := kc.CoreV1().Secrets(ns).Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	for _, manifest := range []string{
		manifests.Registration(uniqueName("reg"), "crud.example.com/"+uniqueName("things")),
		manifests.Grant(ns, "grant"),
		manifests.Claim(ns, "claim"),
		manifests.Bucket(ns, "bucket"),
		manifests.ClaimPolicy(uniqueName("ccp")),
		manifests.GrantPolicy(uniqueName("gcp")),
	} {
		obj := mustCreate(ctx, t, dc, manifest)
		res := dc.Resource(gvrOf(t, obj)).Namespace(obj.GetNamespace())
		got, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get %s: %v", obj.GetKind(), err)
		}
		if got.GetUID() != obj.GetUID() {
			t.Fatalf("get %s returned another object", obj.GetKind())
		}
		if err := res.Delete(ctx, obj.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete %s: %v", obj.GetKind(), err)
		}
		waitGone(ctx, t, obj.GetKind(), func(ctx context.Context) error {
			_, err := res.Get(ctx, obj.GetName(), metav1.GetOptions{})
			return err
		})
	}
}
