package compat

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestWhatReferenceClientsRead: claims, grants, buckets and policies carry
// the labels, owners, names, shapes and condition messages the reference's
// clients read.
func TestWhatReferenceClientsRead(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	ctx := context.Background()
	p := f.SecretsPolicy(3)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s1", Namespace: f.NS}}); err != nil {
		t.Fatal(err)
	}

	// The claim: labels, annotation, owner, message.
	// The claim is written just after the create is admitted.
	claims := &quotav1alpha1.ResourceClaimList{}
	eventually(t, "one claim labelled auto-created=true, policy="+p.Name, func(ctx context.Context) (bool, error) {
		err := c.List(ctx, claims, client.InNamespace(f.NS), client.MatchingLabels{quotav1alpha1.LabelPolicy: p.Name, quotav1alpha1.LabelAutoCreated: "true"})
		return err == nil && len(claims.Items) == 1, err
	})
	claim := &claims.Items[0]
	if got := claim.Labels[quotav1alpha1.LabelGVK]; got != "core.v1.Secret" {
		t.Errorf("label %s = %q, want core.v1.Secret", quotav1alpha1.LabelGVK, got)
	}
	if got := claim.Annotations[quotav1alpha1.AnnotationCreatedBy]; got != "claim-creation-plugin" {
		t.Errorf("annotation %s = %q", quotav1alpha1.AnnotationCreatedBy, got)
	}
	if len(claim.OwnerReferences) != 1 || claim.OwnerReferences[0].Name != "s1" || claim.OwnerReferences[0].Controller == nil || *claim.OwnerReferences[0].Controller ||
		claim.OwnerReferences[0].BlockOwnerDeletion == nil || *claim.OwnerReferences[0].BlockOwnerDeletion {
		t.Errorf("the claim's ownerReferences are %+v, want the Secret with controller: false, blockOwnerDeletion: false", claim.OwnerReferences)
	}
	if d := f.Decided(claim.Name); d.Message != "All 1 resource requests have been granted" {
		t.Errorf("a granted claim's message is %q", d.Message)
	}

	// The bucket: the reference's name and labels.
	sum := sha256.Sum256([]byte(string(f.RT("secrets")) + f.Org.Kind + f.Org.Name))
	name := "bucket-" + hex.EncodeToString(sum[:])
	b := &quotav1alpha1.AllowanceBucket{}
	eventually(t, "bucket "+name, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: f.BucketNS, Name: name}, b)
		return err == nil && b.Status.Allocated == 1, err
	})
	if b.Labels[quotav1alpha1.LabelConsumerKind] != "Organization" || b.Labels[quotav1alpha1.LabelConsumerName] != f.Org.Name {
		t.Errorf("bucket labels %v", b.Labels)
	}

	// contributingGrantRefs follow the grant's generation.
	g := &quotav1alpha1.ResourceGrant{}
	eventually(t, "an active grant says \"ResourceGrant is active\"", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: f.NS, Name: "g"}, g); err != nil {
			return false, err
		}
		a := meta.FindStatusCondition(g.Status.Conditions, quotav1alpha1.GrantConditionActive)
		return a != nil && a.Status == metav1.ConditionTrue && a.Message == "ResourceGrant is active", fmt.Errorf("%+v", a)
	})
	// The reference's scenarios assert a grant has exactly one condition,
	// also for a consumer they never create (as this organization).
	if len(g.Status.Conditions) != 1 {
		t.Errorf("the grant's conditions are %+v; want exactly [Active]", g.Status.Conditions)
	}
	f.UpdateGrant(g, func(g *quotav1alpha1.ResourceGrant) { g.Spec.Allowances[0].Buckets[0].Amount = 4 })
	eventually(t, "contributingGrantRefs at the grant's new generation", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: f.BucketNS, Name: name}, b); err != nil {
			return false, err
		}
		r := b.Status.ContributingGrantRefs
		return len(r) == 1 && r[0].Name == "g" && r[0].Amount == 4 && r[0].LastObservedGeneration == g.Generation && g.Generation == 2, fmt.Errorf("%+v", r)
	})

	// Registration and policy messages.
	reg := &quotav1alpha1.ResourceRegistration{}
	if err := c.Get(ctx, client.ObjectKey{Name: f.ID + "-secrets"}, reg); err != nil {
		t.Fatal(err)
	}
	if a := meta.FindStatusCondition(reg.Status.Conditions, quotav1alpha1.RegistrationConditionActive); a == nil ||
		a.Message != "The registration is active and resource grants and claims can now be created for this resource type." {
		t.Errorf("an active registration's condition is %+v", a)
	}
	if r := meta.FindStatusCondition(p.Status.Conditions, quotav1alpha1.PolicyConditionReady); r == nil || r.Message != "Policy is ready and active" {
		t.Errorf("a Ready policy's condition is %+v", r)
	}

	// A GrantCreationPolicy's grants are owned by their trigger and
	// labelled with the policy; its conditions are Ready alone.
	f.Register("maps")
	gp := &quotav1alpha1.GrantCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-maps"}}
	gp.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	gp.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace == %q", f.NS)}}
	tm := &gp.Spec.Target.ResourceGrantTemplate
	tm.Metadata.Name, tm.Metadata.Namespace = "{{ trigger.metadata.name }}-maps", f.NS
	tm.Spec.ConsumerRef = quotav1alpha1.TemplateConsumerRef{APIGroup: f.Org.APIGroup, Kind: f.Org.Kind, Name: f.Org.Name}
	tm.Spec.Allowances = []quotav1alpha1.GrantTemplateAllowance{{ResourceType: f.RT("maps"), Buckets: []quotav1alpha1.GrantTemplateBucket{{Amount: 2}}}}
	if err := c.Create(ctx, gp); err != nil {
		t.Fatal(err)
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "team", Namespace: f.NS}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	grant := &quotav1alpha1.ResourceGrant{}
	eventually(t, "the policy's grant", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: f.NS, Name: "team-maps"}, grant)
		return err == nil, err
	})
	if grant.Labels[quotav1alpha1.LabelPolicy] != gp.Name {
		t.Errorf("the grant's labels %v lack %s=%s", grant.Labels, quotav1alpha1.LabelPolicy, gp.Name)
	}
	if len(grant.OwnerReferences) != 1 || grant.OwnerReferences[0].UID != cm.UID || grant.OwnerReferences[0].Controller == nil || !*grant.OwnerReferences[0].Controller {
		t.Errorf("the grant's ownerReferences are %+v, want its ConfigMap as controller", grant.OwnerReferences)
	}
	eventually(t, "the GrantCreationPolicy's status in the reference's shape", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(gp), gp); err != nil {
			return false, err
		}
		var types []string
		for _, c := range gp.Status.Conditions {
			types = append(types, c.Type)
		}
		synced := gp.Status.GrantsSynced
		return len(types) == 1 && types[0] == "Ready" && gp.Status.Conditions[0].Message == "Policy is ready and active" &&
			synced != nil && synced.Status == metav1.ConditionTrue, fmt.Errorf("conditions %v, grantsSynced %+v", types, synced)
	})
}

// TestNewClaimStartsPending: a claim no engine has decided reads
// Granted=False, PendingEvaluation, as in the reference.
func TestNewClaimStartsPending(t *testing.T) {
	s, err := testserver.Start(testserver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop() }()
	c := quotatest.NewClient(t, s.Config)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pending"}}); err != nil {
		t.Fatal(err)
	}
	cl := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "new", Namespace: "pending"}, Spec: quotav1alpha1.ResourceClaimSpec{
		ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "acme"},
		Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: "example.com/things", Amount: 1}}}}
	if err := c.Create(ctx, cl); err != nil {
		t.Fatal(err)
	}
	for _, got := range []*quotav1alpha1.ResourceClaim{cl, {}} {
		if got.Name == "" {
			if err := c.Get(ctx, client.ObjectKey{Namespace: "pending", Name: "new"}, got); err != nil {
				t.Fatal(err)
			}
		}
		g := meta.FindStatusCondition(got.Status.Conditions, quotav1alpha1.ClaimConditionGranted)
		if g == nil || g.Status != metav1.ConditionFalse || g.Reason != "PendingEvaluation" || g.Message != "Awaiting capacity evaluation" {
			t.Fatalf("a new claim's Granted condition is %+v, want False/PendingEvaluation/Awaiting capacity evaluation", g)
		}
		if quotav1alpha1.ClaimDecision(got.Status.Conditions) != nil {
			t.Fatal("a pending claim reads as decided")
		}
	}
}

// TestColumnsAndSelectableFields: kubectl get shows the reference's columns
// (quotaplane's extra ones only with -o wide) but for AllowanceBucket's,
// which show used, limit and percent (issue 36) and which copy a row is
// (issue 55), ClaimCreationPolicy's, which add the mode admission applies
// (issue 54), and ResourceGrant's, which add whether the consumer exists
// (issue 55; docs/compatibility.md), and the reference's field selectors
// work.
func TestColumnsAndSelectableFields(t *testing.T) {
	for _, tc := range []struct{ path, want string }{
		{"/apis/quota.miloapis.com/v1alpha1/resourceclaims", "Name,Granted,Age"},
		{"/apis/quota.miloapis.com/v1alpha1/resourcegrants", "Name,Active,Consumer State,Age"},
		{"/apis/quota.miloapis.com/v1alpha1/allowancebuckets", "Name,Resource Type,Used,Limit,Used%,Placement,Age"},
		{"/apis/quota.miloapis.com/v1alpha1/resourceregistrations", "Name,Type,Active,Age"},
		{"/apis/quota.miloapis.com/v1alpha1/claimcreationpolicies", "Name,Target,Disabled,Ready,Mode,Age"},
		{"/apis/quota.miloapis.com/v1alpha1/grantcreationpolicies", "Name,Target,Disabled,Ready,Age"},
	} {
		defs := table(t, tc.path)
		if got := columns(defs, 0); got != tc.want {
			t.Errorf("%s: columns %q, want the reference's %q", tc.path, got, tc.want)
		}
	}
	if got := columns(table(t, "/apis/quota.miloapis.com/v1alpha1/resourceclaims"), 1); got == "" {
		t.Error("resourceclaims: no -o wide columns")
	}

	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	ctx := context.Background()
	f.Register("sel")
	f.Grant("sel", map[string][]quotatest.Bucket{"sel": {{Amount: 1}}})
	f.Claim("sel", quotatest.R("sel", 1))
	f.Decided("sel")
	f.WaitBucket(quotatest.N(1, 1, 0), "sel")
	for _, tc := range []struct {
		list client.ObjectList
		sel  fields.Set
	}{
		{&quotav1alpha1.ResourceClaimList{}, fields.Set{"spec.consumerRef.kind": "Organization", "spec.consumerRef.name": f.Org.Name}},
		{&quotav1alpha1.ResourceGrantList{}, fields.Set{"spec.consumerRef.kind": "Organization", "spec.consumerRef.name": f.Org.Name}},
		{&quotav1alpha1.AllowanceBucketList{}, fields.Set{"spec.consumerRef.name": f.Org.Name, "spec.resourceType": string(f.RT("sel"))}},
		{&quotav1alpha1.ResourceRegistrationList{}, fields.Set{"spec.resourceType": string(f.RT("sel")), "spec.consumerType.kind": "Organization"}},
		{&quotav1alpha1.ClaimCreationPolicyList{}, fields.Set{"spec.trigger.resource.kind": "NoSuchKind", "spec.disabled": "false"}},
	} {
		err := c.List(ctx, tc.list, client.MatchingFieldsSelector{Selector: fields.SelectorFromSet(tc.sel)})
		if err != nil {
			t.Errorf("%T with field selector %v: %v", tc.list, tc.sel, err)
			continue
		}
		n := meta.LenList(tc.list)
		want := 1
		if _, ok := tc.list.(*quotav1alpha1.ClaimCreationPolicyList); ok {
			want = 0
		}
		if n != want {
			t.Errorf("%T with field selector %v: %d items, want %d", tc.list, tc.sel, n, want)
		}
	}
}
