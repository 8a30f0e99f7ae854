package compat

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestRefusalsStartWithTheReferenceWords: a quota refusal is a 403 whose
// message starts with the reference's sentence and goes on with
// quotaplane's detail; immutability and duplicate errors use the
// reference's words.
func TestRefusalsStartWithTheReferenceWords(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	ctx := context.Background()
	f.SecretsPolicy(1)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: f.NS}}); err != nil {
		t.Fatal(err)
	}
	err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s2", Namespace: f.NS}})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a create over the limit: want 403, got %v", err)
	}
	mustContain(t, err, `secrets "s2" is forbidden: Insufficient quota resources available: requested 1 unit of `+string(f.RT("secrets")),
		"only 0 of the limit 1 is available")

	reg := &quotav1alpha1.ResourceRegistration{}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: f.ID + "-secrets"}, reg); err != nil {
			return err
		}
		reg.Spec.ResourceType = f.RT("other")
		return c.Update(ctx, reg)
	})
	mustContain(t, err, "spec.resourceType is immutable")

	dup := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-dup"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: f.Org.APIGroup, Kind: f.Org.Kind},
		Type:         quotav1alpha1.RegistrationTypeEntity, ResourceType: f.RT("dup"), BaseUnit: "deployment",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{APIGroup: "apps", Kind: "Deployment"}, {APIGroup: "apps", Kind: "Deployment"}},
	}}
	err = c.Create(ctx, dup)
	if !apierrors.IsInvalid(err) {
		t.Fatalf("a duplicate claiming resource: want 422, got %v", err)
	}
	mustContain(t, err, "spec.claimingResources[1]: Duplicate value", "duplicate claiming resource 'apps/Deployment' (first occurrence at index 0)")
}
