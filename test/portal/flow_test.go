package portal

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestTenantAsksStaffApprove is the whole flow in a browser: the tenant
// signs in, sees its usage (4 of 10, 40%), asks for 30; staff sign in, see
// the request pending and approve 25; the tenant's page, never reloaded,
// shows the limit of 25 and the request Approved.
func TestTenantAsksStaffApprove(t *testing.T) {
	b := browser(t)
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	org := fmt.Sprintf("acme%d", time.Now().UnixNano()%100000)
	ns := rmv1alpha1.OrganizationNamespace(org)
	rt := "compute.example.com/vcpus"
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "vcpus"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}, Description: "Virtual CPUs",
		Type: quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "core",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{APIGroup: "compute.example.com", Kind: "Instance"}}}}
	must(client.IgnoreAlreadyExists(admin.Create(ctx, reg)))
	must(admin.Create(ctx, &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}))
	must(wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return admin.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}) == nil, nil
	}))
	consumer := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: org}
	must(admin.Create(ctx, &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "platform", Namespace: ns}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: consumer, Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: 10}}}}}}))
	bucket := quota.BucketName(quota.BucketID{Consumer: quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: org}, ResourceType: rt})
	must(wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		b := &quotav1alpha1.AllowanceBucket{}
		return admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: bucket}, b) == nil && b.Status.Limit == 10, nil
	}))
	must(admin.Create(ctx, &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "vm-1", Namespace: ns}, Spec: quotav1alpha1.ResourceClaimSpec{
		ConsumerRef: consumer, Requests: []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(rt), Amount: 4}},
		ResourceRef: &quotav1alpha1.ResourceRef{APIGroup: "compute.example.com", Kind: "Instance", Name: "vm-1", Namespace: ns}}}))
	// A consumer outside any organization: a Namespace with a grant.
	team := "team-" + org
	must(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}))
	nsRT := "core/configmaps-" + org
	must(admin.Create(ctx, &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: "configmaps-" + org}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType: quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"}, Type: quotav1alpha1.RegistrationTypeAllocation,
		ResourceType: quotav1alpha1.ResourceType(nsRT), BaseUnit: "configmap", ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}}}}))
	must(wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := admin.Create(ctx, &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: team, Namespace: "quotaplane-system"}, Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: team}, Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(nsRT), Buckets: []quotav1alpha1.GrantBucket{{Amount: 5}}}}}})
		return err == nil, nil // the registration is active a moment after it is created
	}))
	tenantToken, _ := quotatest.ServiceAccountToken(t, srv.Config, ns, "owner", rmv1alpha1.OrganizationOwnerRole, ns)
	staffToken, staffUser := quotatest.ServiceAccountToken(t, srv.Config, "default", "staff-"+org, "quotaplane-quota-approver", "")

	// The tenant: its usage, as bars and numbers.
	tenant := tab(t, b)
	signIn(t, tenant, tenantToken, "")
	waitText(t, tenant, bucketSel("Organization", org, rt, "limit"), "10", 30*time.Second)
	waitText(t, tenant, bucketSel("Organization", org, rt, "allocated"), "4", 10*time.Second)
	waitText(t, tenant, bucketSel("Organization", org, rt, "percent"), "40", 10*time.Second)
	screenshot(t, tenant, "portal-tenant")

	// Asking for more, from the link next to the number.
	run(t, tenant, "asking for 30", 30*time.Second,
		chromedp.Click(chromedp.CSS(fmt.Sprintf(`.bucket[data-consumer="Organization/%s"] a.request-increase`, org))),
		chromedp.WaitVisible(chromedp.CSS("#req-limit")),
		chromedp.SetValue(chromedp.CSS("#req-limit"), "30"),
		chromedp.SetValue(chromedp.CSS("#req-justification"), "launch week"),
		chromedp.Click(chromedp.CSS("#req-submit")),
		chromedp.WaitVisible(chromedp.CSS("#requests tr[data-request] td.state")),
	)
	waitText(t, tenant, "#requests tr[data-request] td.state", "Pending", 15*time.Second)
	list := &quotav1alpha1.QuotaRequestList{}
	must(admin.List(ctx, list, client.InNamespace(ns)))
	if len(list.Items) != 1 || list.Items[0].Spec.RequestedLimit != 30 {
		t.Fatalf("the request the portal made: %+v", list.Items)
	}
	qr := list.Items[0]

	// A mark on the tenant's page: a reload would lose it.
	if _, err := chromedp.Run(tenant, chromedp.Evaluate[bool](`window.notReloaded = true`)); err != nil {
		t.Fatal(err)
	}

	// Staff: pending, approve 25 of the 30.
	staff := tab(t, b)
	signIn(t, staff, staffToken, "#/staff")
	row := fmt.Sprintf(`#pending tr[data-request="%s/%s"]`, ns, qr.Name)
	run(t, staff, "staff seeing the request", 30*time.Second, chromedp.WaitVisible(chromedp.CSS(row)),
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#orgs tr[data-org="%s"]`, org))))
	// Consumers outside any organization are listed too.
	run(t, staff, "staff seeing the Namespace consumer", 30*time.Second,
		chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#others tr[data-consumer="Namespace/%s"]`, team))))
	screenshot(t, staff, "portal-staff")
	run(t, staff, "approving 25", 30*time.Second,
		chromedp.SetValue(chromedp.CSS(row+" .grant-limit"), "25"),
		chromedp.Click(chromedp.CSS(row+" .approve")),
		chromedp.WaitNotPresent(chromedp.CSS(row)),
	)

	// The tenant's page, not reloaded, follows.
	waitText(t, tenant, bucketSel("Organization", org, rt, "limit"), "25", 30*time.Second)
	waitText(t, tenant, "#requests tr[data-request] td.state", "Approved", 15*time.Second)
	if marked, err := chromedp.Run(tenant, chromedp.Evaluate[bool](`window.notReloaded === true`)); err != nil || !marked {
		t.Error("the tenant's page was reloaded: it should follow the bucket by itself")
	}
	// At 1280px the tenant's requests table, with a service account's long
	// name as who asked and who decided, fits without scrolling sideways.
	fits, err := chromedp.Run(tenant, chromedp.Evaluate[bool](`(() => { const w = document.querySelector('#requests').closest('.table-wrap'); return w.scrollWidth <= w.clientWidth + 1; })()`))
	if err != nil || !fits {
		width, _ := chromedp.Run(tenant, chromedp.Evaluate[int](`document.querySelector('#requests').scrollWidth`))
		t.Errorf("the tenant's requests table at 1280px is %dpx wide, wider than its box (%v)", width, err)
	}
	// At a phone's width, both views fit: nothing wider than the screen
	// but the tables, which scroll inside their own boxes.
	for name, page := range map[string]context.Context{"tenant": tenant, "staff": staff} {
		must(chromedp.Do(page, chromedp.EmulateViewport(390, 844)))
		fits, err := chromedp.Run(page, chromedp.Evaluate[bool](`document.documentElement.scrollWidth <= window.innerWidth + 1`))
		if err != nil || !fits {
			width, _ := chromedp.Run(page, chromedp.Evaluate[int](`document.documentElement.scrollWidth`))
			t.Errorf("the %s view at 390px is %dpx wide (%v)", name, width, err)
		}
	}
	must(admin.Get(ctx, client.ObjectKeyFromObject(&qr), &qr))
	if qr.Status.Decision.DecidedBy != staffUser || *qr.Status.GrantedLimit != 25 {
		t.Fatalf("decided by %q, granted %v", qr.Status.Decision.DecidedBy, qr.Status.GrantedLimit)
	}
}
