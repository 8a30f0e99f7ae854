package tenancy

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
)

// claims is a reader that lists a fixed set of claims.
type claims []quotav1alpha1.ResourceClaim

func (c claims) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return nil
}

func (c claims) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	list.(*quotav1alpha1.ResourceClaimList).Items = append([]quotav1alpha1.ResourceClaim(nil), c...)
	return nil
}

// TestChargedTo: every claim naming the organization as its consumer, and
// only those, keeps it waiting, named by the object that holds it.
func TestChargedTo(t *testing.T) {
	claim := func(ns, name, kind, consumer string, ref *quotav1alpha1.ResourceRef) quotav1alpha1.ResourceClaim {
		return quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: kind, Name: consumer}, ResourceRef: ref}}
	}
	stored := claims{
		claim("apps", "c1", "Organization", "acme", &quotav1alpha1.ResourceRef{Kind: "ConfigMap", Namespace: "apps", Name: "one"}),
		claim("organization-acme", "direct", "Organization", "acme", nil),
		claim("apps", "c2", "Organization", "globex", &quotav1alpha1.ResourceRef{Kind: "ConfigMap", Namespace: "apps", Name: "two"}),
		claim("apps", "c3", "Project", "acme", &quotav1alpha1.ResourceRef{Kind: "ConfigMap", Namespace: "apps", Name: "three"}),
	}
	got, err := chargedTo(stored, "Organization")(context.Background(), "acme")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ConfigMap apps/one (charged to this organization by ResourceClaim apps/c1)",
		"ResourceClaim organization-acme/direct (charged to this organization)",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
