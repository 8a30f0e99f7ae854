package apiserver

import (
	"github.com/quotaplane/quotaplane/test/manifests"

	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// expectFieldError checks that err refuses an object as Invalid, naming the
// field and the problem.
func expectFieldError(t *testing.T, err error, field, problem string) {
	t.Helper()
	if err == nil {
		t.Fatalf("the object was accepted; want a field error on %s", field)
	}
	if !apierrors.IsInvalid(err) {
		t.Fatalf("want 422 Invalid, got %v", err)
	}
	status, ok := err.(apierrors.APIStatus)
	if !ok || status.Status().Details == nil {
		t.Fatalf("error has no field details: %v", err)
	}
	for _, c := range status.Status().Details.Causes {
		if c.Field == field && strings.Contains(c.Message, problem) {
			return
		}
	}
	t.Fatalf("want a cause on field %s containing %q, got %v", field, problem, err)
}

func TestRegistrationMissingResourceTypeRefused(t *testing.T) {
	_, dc := clients(t, srv.Config)
	manifest := strings.Replace(manifests.Registration(uniqueName("reg"), "x.example.com/y"), "  resourceType: x.example.com/y\n", "", 1)
	_, err := create(t.Context(), t, dc, manifest)
	expectFieldError(t, err, "spec.resourceType", "Required")
}

func TestGrantNegativeAmountRefused(t *testing.T) {
	_, dc := clients(t, srv.Config)
	manifest := strings.Replace(manifests.Grant("default", uniqueName("grant")), "amount: 50", "amount: -1", 1)
	_, err := create(t.Context(), t, dc, manifest)
	expectFieldError(t, err, "spec.allowances[0].buckets[0].amount", "greater than or equal to 0")
}

func TestRegistrationUnknownTypeRefused(t *testing.T) {
	_, dc := clients(t, srv.Config)
	manifest := strings.Replace(manifests.Registration(uniqueName("reg"), "x.example.com/y"), "type: Entity", "type: Counter", 1)
	_, err := create(t.Context(), t, dc, manifest)
	expectFieldError(t, err, "spec.type", `supported values: "Entity", "Allocation"`)
}

func TestClaimWith21RequestsRefused(t *testing.T) {
	_, dc := clients(t, srv.Config)
	var b strings.Builder
	for i := range 21 {
		fmt.Fprintf(&b, "  - resourceType: example.com/r%d\n    amount: 1\n", i)
	}
	manifest := fmt.Sprintf(`
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceClaim
metadata:
  name: %s
  namespace: default
spec:
  consumerRef:
    apiGroup: resourcemanager.miloapis.com
    kind: Organization
    name: acme-corp
  requests:
%s`, uniqueName("claim"), b.String())
	_, err := create(t.Context(), t, dc, manifest)
	expectFieldError(t, err, "spec.requests", "must have at most 20 items")
}

func TestClaimZeroAmountRefused(t *testing.T) {
	_, dc := clients(t, srv.Config)
	manifest := strings.Replace(manifests.Claim("default", uniqueName("claim")), "amount: 1", "amount: 0", 1)
	_, err := create(t.Context(), t, dc, manifest)
	expectFieldError(t, err, "spec.requests[0].amount", "greater than or equal to 1")
}

func TestClaimDuplicateResourceTypeRefused(t *testing.T) {
	_, dc := clients(t, srv.Config)
	manifest := strings.Replace(manifests.Claim("default", uniqueName("claim")), "  resourceRef:", `  - resourceType: resourcemanager.miloapis.com/projects
    amount: 2
  resourceRef:`, 1)
	_, err := create(t.Context(), t, dc, manifest)
	expectFieldError(t, err, "spec.requests[1]", "Duplicate value")
}

func TestRegistrationDuplicateClaimingResourceRefused(t *testing.T) {
	_, dc := clients(t, srv.Config)
	manifest := manifests.Registration(uniqueName("reg"), "x.example.com/y") + `  - apiGroup: resourcemanager.miloapis.com
    kind: Project
`
	_, err := create(t.Context(), t, dc, manifest)
	expectFieldError(t, err, "spec.claimingResources[1]", "Duplicate value")
}

func TestRegistrationImmutableFieldsRefused(t *testing.T) {
	ctx := t.Context()
	_, dc := clients(t, srv.Config)
	reg := mustCreate(ctx, t, dc, manifests.Registration(uniqueName("reg"), "immutable.example.com/"+uniqueName("things")))
	res := dc.Resource(gvrOf(t, reg))
	defer res.Delete(context.Background(), reg.GetName(), metav1.DeleteOptions{})

	for _, tc := range []struct {
		field, value, message string
	}{
		{"resourceType", "immutable.example.com/other", "resourceType is immutable"},
		{"type", "Allocation", "type is immutable"},
	} {
		t.Run(tc.field, func(t *testing.T) {
			changed := reg.DeepCopy()
			spec := changed.Object["spec"].(map[string]any)
			spec[tc.field] = tc.value
			_, err := res.Update(ctx, changed, metav1.UpdateOptions{})
			expectFieldError(t, err, "spec."+tc.field, tc.message)
		})
	}
	t.Run("consumerType", func(t *testing.T) {
		changed := reg.DeepCopy()
		changed.Object["spec"].(map[string]any)["consumerType"] = map[string]any{"apiGroup": "resourcemanager.miloapis.com", "kind": "Project"}
		_, err := res.Update(ctx, changed, metav1.UpdateOptions{})
		expectFieldError(t, err, "spec.consumerType", "consumerType is immutable")
	})
	// A mutable field still changes.
	changed := reg.DeepCopy()
	changed.Object["spec"].(map[string]any)["description"] = "changed"
	if _, err := res.Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("changing the description: %v", err)
	}
}

func TestClaimRequestsImmutable(t *testing.T) {
	ctx := t.Context()
	_, dc := clients(t, srv.Config)
	claim := mustCreate(ctx, t, dc, manifests.Claim("default", uniqueName("claim")))
	res := dc.Resource(gvrOf(t, claim)).Namespace("default")
	defer res.Delete(context.Background(), claim.GetName(), metav1.DeleteOptions{})
	changed := claim.DeepCopy()
	reqs := changed.Object["spec"].(map[string]any)["requests"].([]any)
	reqs[0].(map[string]any)["amount"] = int64(7)
	_, err := res.Update(ctx, changed, metav1.UpdateOptions{})
	expectFieldError(t, err, "spec.requests", "requests are immutable")
}
