package nativeapi

import (
	"bytes"
	"context"
	"fmt"
	"path"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/config/crd"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// protobufPrefix starts every object the storage layer writes as protobuf.
var protobufPrefix = []byte("k8s\x00")

// TestUpgradeFromCRDStorage fills a server that serves the kinds as CRDs
// (claims admitted and charged, a bucket), stops it, starts the native
// server on the same data directory and checks that every object and
// number is kept, that the CRDs are gone, and that quota goes on being
// enforced from the same usage.
func TestUpgradeFromCRDStorage(t *testing.T) {
	dir := t.TempDir()
	eo := quotatest.FastEngineOptions()
	old, err := testserver.Start(testserver.Options{DataDir: dir, CRDStorage: true, Engine: &eo})
	if err != nil {
		t.Fatal(err)
	}
	c := quotatest.NewClient(t, old.Config)
	f := quotatest.NewFixture(t, c)
	const limit = 3
	f.SecretsPolicy(limit)
	ctx := context.Background()
	for i := range 2 {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: f.NS}}); err != nil {
			t.Fatal(err)
		}
	}
	before := waitAllocated(t, c, f, 2)
	claimsBefore := claims(t, c, f.NS)
	if len(claimsBefore) != 2 {
		t.Fatalf("want 2 claims before the upgrade, got %d", len(claimsBefore))
	}
	if err := old.StopKeep(); err != nil {
		t.Fatal(err)
	}

	eo2 := quotatest.FastEngineOptions()
	srv, err := testserver.Start(testserver.Options{DataDir: dir, Engine: &eo2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c = quotatest.NewClient(t, srv.Config)
	f.C = c

	// The CRDs are gone, the kinds served natively.
	crds := &unstructured.UnstructuredList{}
	crds.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinitionList"))
	if err := c.List(ctx, crds); err != nil {
		t.Fatal(err)
	}
	for _, d := range crds.Items {
		if g, _, _ := unstructured.NestedString(d.Object, "spec", "group"); g == quotav1alpha1.GroupName {
			t.Errorf("CRD %s is still installed after the upgrade", d.GetName())
		}
	}
	// A quota CRD cannot come back: it would claim the native API, and its
	// deletion would delete the objects at the same keys.
	for _, d := range crdsOf(t) {
		err := c.Create(ctx, d)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "quotaplane controller") {
			t.Errorf("installing CRD %s into serve: want 403 saying what the CRDs are for, got %v", d.GetName(), err)
		}
	}
	// Every claim and number is kept.
	after := claims(t, c, f.NS)
	if len(after) != len(claimsBefore) {
		t.Fatalf("claims: %d before the upgrade, %d after", len(claimsBefore), len(after))
	}
	for name, was := range claimsBefore {
		now, ok := after[name]
		if !ok {
			t.Errorf("claim %s lost in the upgrade", name)
			continue
		}
		if now.UID != was.UID || now.Spec.Requests[0].Amount != was.Spec.Requests[0].Amount || !granted(now) {
			t.Errorf("claim %s changed in the upgrade: %+v, was %+v", name, now, was)
		}
	}
	b := waitAllocated(t, c, f, 2)
	if b.Status.Limit != before.Status.Limit || b.Status.Allocated != before.Status.Allocated {
		t.Errorf("bucket: limit %d allocated %d after the upgrade; %d and %d before", b.Status.Limit, b.Status.Allocated, before.Status.Limit, before.Status.Allocated)
	}
	// Quota goes on from the same usage: one more fits, the next is refused.
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s2", Namespace: f.NS}}); err != nil {
		t.Fatalf("the third secret of %d: %v", limit, err)
	}
	err = c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s3", Namespace: f.NS}})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the fourth secret over a limit of %d: want forbidden, got %v", limit, err)
	}
	waitAllocated(t, c, f, 3)

	// Old objects stay as the CRD stored them (JSON) until written again;
	// the new claim is stored as protobuf by the engine's journal.
	etcd, err := srv.EtcdClient()
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	now := claims(t, c, f.NS)
	for name, cl := range now {
		resp, err := etcd.Get(ctx, path.Join("/registry", quotav1alpha1.GroupName, "resourceclaims", f.NS, name))
		if err != nil || len(resp.Kvs) != 1 {
			t.Fatalf("claim %s in etcd: %v", name, err)
		}
		isProto := bytes.HasPrefix(resp.Kvs[0].Value, protobufPrefix)
		_, old := claimsBefore[name]
		if old == isProto {
			t.Errorf("claim %s (from before the upgrade: %v) stored as protobuf: %v", name, old, isProto)
		}
		if !old && !hasManager(&cl, "quotaplane-engine") {
			t.Errorf("claim %s written by the engine has no managedFields of quotaplane-engine: %+v", name, cl.ManagedFields)
		}
	}
}

func hasManager(o metav1.Object, manager string) bool {
	for _, m := range o.GetManagedFields() {
		if m.Manager == manager {
			return true
		}
	}
	return false
}

func claims(t *testing.T, c client.Client, ns string) map[string]quotav1alpha1.ResourceClaim {
	t.Helper()
	var l quotav1alpha1.ResourceClaimList
	if err := c.List(context.Background(), &l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	out := map[string]quotav1alpha1.ResourceClaim{}
	for _, cl := range l.Items {
		if cl.Spec.ResourceRef == nil || cl.Spec.ResourceRef.Name == "in-force-probe" {
			continue
		}
		out[cl.Name] = cl
	}
	return out
}

// waitAllocated waits until the fixture's bucket shows allocated.
func waitAllocated(t *testing.T, c client.Client, f *quotatest.Fixture, allocated int64) quotav1alpha1.AllowanceBucket {
	t.Helper()
	var got quotav1alpha1.AllowanceBucket
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var l quotav1alpha1.AllowanceBucketList
		if err := c.List(ctx, &l, client.InNamespace(f.BucketNS)); err != nil {
			return false, nil
		}
		for _, b := range l.Items {
			if b.Spec.ResourceType == f.RT("secrets") && b.Status.Allocated == allocated {
				got = b
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("bucket of %s never showed %d allocated", f.RT("secrets"), allocated)
	}
	return got
}

func granted(c quotav1alpha1.ResourceClaim) bool {
	d := quotav1alpha1.ClaimDecision(c.Status.Conditions)
	return d != nil && d.Status == metav1.ConditionTrue
}

// crdsOf are the CRDs quotaplane crds prints, as objects to create.
func crdsOf(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	all, err := crd.All()
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, d := range all {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{Object: m}
		u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		out = append(out, u)
	}
	return out
}
