package portal

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/timed"
)

// TestThePortalShowsATrialEndingAndTheLimitBelowUsage: an organization
// uses 4 of a limit of 5, of which 3 are a trial ending in seconds. The
// tenant's page says the trial expires soon and what the limit falls to;
// once it has expired, without a reload, that the bucket is over its limit.
func TestThePortalShowsATrialEndingAndTheLimitBelowUsage(t *testing.T) {
	b := browser(t)
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	org := fmt.Sprintf("trial%d", time.Now().UnixNano()%100000)
	ns := rmv1alpha1.OrganizationNamespace(org)
	rt := "compute.example.com/gpus-" + org
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(admin.Create(ctx, &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "gpus-" + org}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"},
		Type:         quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "gpu"}}))
	must(admin.Create(ctx, &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}))
	must(wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return admin.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}) == nil, nil
	}))
	consumer := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: org}
	grant := func(name string, amount int64, until *metav1.Time) error {
		return admin.Create(ctx, &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: consumer, ExpiresAt: until,
			Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: amount}}}}}})
	}
	must(wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return grant("platform", 2, nil) == nil, nil // the registration is active a moment after it is created
	}))
	lead := 20 * time.Second
	began := time.Now()
	until := metav1.NewTime(began.Add(lead + time.Second).Truncate(time.Second)) // at least lead away
	must(grant("trial", 3, &until))
	must(wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := admin.Create(ctx, &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "training", Namespace: ns}, Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: consumer, Requests: []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(rt), Amount: 4}}}})
		return err == nil, nil
	}))
	tenantToken, _ := quotatest.ServiceAccountToken(t, srv.Config, ns, "owner", rmv1alpha1.OrganizationOwnerRole, ns)

	tenant := tab(t, b)
	signIn(t, tenant, tenantToken, "")
	waitText(t, tenant, bucketSel("Organization", org, rt, "allocated"), "4", 30*time.Second)
	waitTextContaining(t, tenant, bucketSel("Organization", org, rt, "expiring-soon"), 20*time.Second,
		"Expiring soon", "ResourceGrant "+ns+"/trial (3)", "falls from 5 to 2")
	// Timed: the page must show the warning before the expiry. Bound 20 s
	// (the expiry's lead), at least 10 times the median measured alone;
	// docs/benchmarks.md §16 (5x the CI-load median).
	if !timed.Within(t, "the portal's expiry warning shown before the expiry", time.Since(began), lead) {
		t.FailNow()
	}
	waitText(t, tenant, bucketSel("Organization", org, rt, "limit"), "2", 40*time.Second)
	waitTextContaining(t, tenant, bucketSel("Organization", org, rt, "over-limit"), 20*time.Second,
		"Over its limit", "4 allocated exceeds the limit 2", "expired")
	screenshot(t, tenant, "portal-over-limit")
}
