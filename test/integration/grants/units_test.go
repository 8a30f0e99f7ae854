package grants

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestOneUnitStory: grants and claims accept an amount as an integer in base
// units or as a quantity that is a whole number of them, stored as the
// integer (what clients of the reference read); what cannot be converted is
// refused on its field path and stores nothing; buckets show their unit
// (-o wide), and a refusal counts in the base unit and the display unit.
func TestOneUnitStory(t *testing.T) {
	ctx := context.Background()
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-memory"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: f.Org.APIGroup, Kind: f.Org.Kind},
		Type:         quotav1alpha1.RegistrationTypeAllocation, ResourceType: f.RT("memory"),
		BaseUnit: "MiB", DisplayUnit: "GiB", UnitConversionFactor: 1024, BaseUnitQuantity: ptr.To(resource.MustParse("1Mi")),
		ClaimingResources: []quotav1alpha1.ClaimingResource{{APIGroup: quota.OrganizationGroup, Kind: "Project"}},
	}}
	if err := f.C.Create(ctx, reg); err != nil {
		t.Fatal(err)
	}
	f.Register("projects") // no baseUnitQuantity: integers only
	f.WaitCondition(reg, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)

	dyn := dynamic.NewForConfigOrDie(srv.Config)
	grants := dyn.Resource(quotav1alpha1.SchemeGroupVersion.WithResource("resourcegrants")).Namespace(f.NS)
	claims := dyn.Resource(quotav1alpha1.SchemeGroupVersion.WithResource("resourceclaims")).Namespace(f.NS)
	grant := func(name, rt string, amount any) error {
		_, err := grants.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": quotav1alpha1.SchemeGroupVersion.String(), "kind": "ResourceGrant",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"consumerRef": map[string]any{"apiGroup": f.Org.APIGroup, "kind": f.Org.Kind, "name": f.Org.Name},
				"allowances":  []any{map[string]any{"resourceType": string(f.RT(rt)), "buckets": []any{map[string]any{"amount": amount}}}},
			},
		}}, metav1.CreateOptions{})
		return err
	}
	claim := func(name string, amount any) error {
		_, err := claims.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": quotav1alpha1.SchemeGroupVersion.String(), "kind": "ResourceClaim",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"consumerRef": map[string]any{"apiGroup": f.Org.APIGroup, "kind": f.Org.Kind, "name": f.Org.Name},
				"requests":    []any{map[string]any{"resourceType": string(f.RT("memory")), "amount": amount}},
			},
		}}, metav1.CreateOptions{})
		return err
	}

	if err := grant("memory", "memory", "16Gi"); err != nil {
		t.Fatalf("a grant of 16Gi: %v", err)
	}
	g := &quotav1alpha1.ResourceGrant{}
	if err := f.C.Get(ctx, client.ObjectKey{Namespace: f.NS, Name: "memory"}, g); err != nil {
		t.Fatal(err)
	}
	if got := g.Spec.Allowances[0].Buckets[0].Amount; got != 16384 {
		t.Errorf("16Gi of a MiB resource type stored as %d, want 16384", got)
	}
	if err := claim("small", "1Gi"); err != nil {
		t.Fatalf("a claim of 1Gi: %v", err)
	}
	if c := f.GetClaim("small"); c.Spec.Requests[0].Amount != 1024 {
		t.Errorf("1Gi stored as %d, want 1024", c.Spec.Requests[0].Amount)
	}
	b := f.WaitBucket(quotatest.N(16384, 1024, 15360), "memory")
	if b.Status.BaseUnit != "MiB" {
		t.Errorf("bucket status.baseUnit %q, want MiB", b.Status.BaseUnit)
	}
	if err := claim("big", "16Gi"); err != nil {
		t.Fatal(err)
	}
	if c := f.Decided("big"); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "requested 16384 MiB (16 GiB) of") {
		t.Errorf("denied claim says %q, want the amount in MiB and GiB", c.Message)
	}

	// Refused, on the field path, storing nothing.
	for _, tc := range []struct {
		name, rt string
		amount   any
		want     string
	}{
		{"not-whole", "memory", "1500Ki", "not a whole number of base units"},
		{"no-unit-quantity", "projects", "2k", "declares no spec.baseUnitQuantity"},
		{"garbage", "memory", "lots", "neither a whole number of base units nor a Kubernetes quantity"},
		{"negative", "memory", int64(-1), "should be greater than or equal to 0"},
	} {
		err := grant(tc.name, tc.rt, tc.amount)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.allowances[0].buckets[0].amount") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("grant %s of %v: got %v, want Invalid at spec.allowances[0].buckets[0].amount saying %q", tc.name, tc.amount, err, tc.want)
		}
		if err := f.C.Get(ctx, client.ObjectKey{Namespace: f.NS, Name: tc.name}, &quotav1alpha1.ResourceGrant{}); !apierrors.IsNotFound(err) {
			t.Errorf("refused grant %s was stored: %v", tc.name, err)
		}
	}
	if err := claim("zero", "0"); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.requests[0].amount") || !strings.Contains(err.Error(), "should be greater than or equal to 1") {
		t.Errorf("a claim of 0: got %v, want Invalid at spec.requests[0].amount", err)
	}

	// A grant template takes the same forms.
	gcp := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": quotav1alpha1.SchemeGroupVersion.String(), "kind": "GrantCreationPolicy",
		"metadata": map[string]any{"name": f.ID + "-memory"},
		"spec": map[string]any{
			"trigger": map[string]any{"resource": map[string]any{"apiVersion": quota.OrganizationGroup + "/v1alpha1", "kind": "Organization"},
				"constraints": []any{map[string]any{"expression": "false"}}},
			"target": map[string]any{"resourceGrantTemplate": map[string]any{
				"metadata": map[string]any{"name": "memory", "namespace": "organization-{{ trigger.metadata.name }}"},
				"spec": map[string]any{
					"consumerRef": map[string]any{"apiGroup": quota.OrganizationGroup, "kind": "Organization", "name": "{{ trigger.metadata.name }}"},
					"allowances":  []any{map[string]any{"resourceType": string(f.RT("memory")), "buckets": []any{map[string]any{"amount": "2Gi"}}}},
				},
			}},
		},
	}}
	gcps := dyn.Resource(quotav1alpha1.SchemeGroupVersion.WithResource("grantcreationpolicies"))
	if _, err := gcps.Create(ctx, gcp, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a grant template of 2Gi: %v", err)
	}
	t.Cleanup(func() { _ = gcps.Delete(context.Background(), gcp.GetName(), metav1.DeleteOptions{}) })
	stored := &quotav1alpha1.GrantCreationPolicy{}
	if err := f.C.Get(ctx, client.ObjectKey{Name: gcp.GetName()}, stored); err != nil {
		t.Fatal(err)
	}
	if got := stored.Spec.Target.ResourceGrantTemplate.Spec.Allowances[0].Buckets[0].Amount; got != 2048 {
		t.Errorf("a template's 2Gi stored as %d, want 2048", got)
	}

	// kubectl get … -o wide: the Unit column of buckets; what claims,
	// grants and registrations add.
	kc := kubernetes.NewForConfigOrDie(srv.Config)
	tableOf := func(ns, resource string) metav1.Table {
		path := []string{"/apis/quota.miloapis.com/v1alpha1"}
		if ns != "" {
			path = append(path, "namespaces", ns)
		}
		raw, err := kc.CoreV1().RESTClient().Get().AbsPath(append(path, resource)...).
			SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var table metav1.Table
		if err := json.Unmarshal(raw, &table); err != nil {
			t.Fatal(err)
		}
		return table
	}
	for _, tc := range []struct{ ns, resource, column string }{
		{f.NS, "resourceclaims", "Object Kind"}, {f.NS, "resourceclaims", "Message"},
		{f.NS, "resourcegrants", "First Amount"}, {"", "resourceregistrations", "Base Unit"},
	} {
		found := false
		for _, c := range tableOf(tc.ns, tc.resource).ColumnDefinitions {
			found = found || c.Name == tc.column && c.Priority == 1
		}
		if !found {
			t.Errorf("%s -o wide has no column %q", tc.resource, tc.column)
		}
	}
	table := tableOf(b.Namespace, "allowancebuckets")
	unit := -1
	for i, c := range table.ColumnDefinitions {
		if c.Name == "Unit" {
			unit = i
			if c.Priority != 1 {
				t.Errorf("the Unit column has priority %d, want 1 (-o wide)", c.Priority)
			}
		}
	}
	if unit < 0 {
		t.Fatalf("no Unit column in %+v", table.ColumnDefinitions)
	}
	found := false
	for _, r := range table.Rows {
		found = found || r.Cells[unit] == "MiB"
	}
	if !found {
		t.Errorf("no bucket row shows MiB: %+v", table.Rows)
	}
}
