package portal

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
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

// sizingWorld is an organization with one project: the organization has
// 10 cores, the project 6, of which a claim holds 4.
type sizingWorld struct {
	org, project, ns, rt string
	admin                client.Client
}

func newSizingWorld(t *testing.T, prefix string) *sizingWorld {
	t.Helper()
	ctx := context.Background()
	id := fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%100000)
	w := &sizingWorld{org: id, project: id + "-web", ns: rmv1alpha1.OrganizationNamespace(id), rt: id + ".example.com/cores", admin: quotatest.NewClient(t, srv.Config)}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(w.admin.Create(ctx, &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: id + "-cores"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType:        quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
		ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}},
		Type:                quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(w.rt), BaseUnit: "core",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{APIGroup: "compute.example.com", Kind: "Instance"}}}}))
	must(w.admin.Create(ctx, &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: w.org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}))
	must(wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.admin.Get(ctx, client.ObjectKey{Name: w.ns}, &corev1.Namespace{}) == nil, nil
	}))
	must(w.admin.Create(ctx, &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: w.project},
		Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: w.org}}}))
	for _, g := range []struct {
		kind, name string
		amount     int64
	}{{"Organization", w.org, 10}, {"Project", w.project, 6}} {
		grant := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: strings.ToLower(g.kind), Namespace: w.ns}, Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: g.kind, Name: g.name},
			Allowances:  []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(w.rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: g.amount}}}}}}
		must(wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			return w.admin.Create(ctx, grant) == nil, nil // the registration is active a moment after it is created
		}))
	}
	must(w.admin.Create(ctx, &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "vm-1", Namespace: w.ns}, Spec: quotav1alpha1.ResourceClaimSpec{
		ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: w.project},
		Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(w.rt), Amount: 4}},
		ResourceRef: &quotav1alpha1.ResourceRef{APIGroup: "compute.example.com", Kind: "Instance", Name: "vm-1", Namespace: w.ns}}}))
	w.waitAllocated(t, "Project", w.project, 6, 4)
	w.waitAllocated(t, "Organization", w.org, 10, 4)
	return w
}

func (w *sizingWorld) waitAllocated(t *testing.T, kind, name string, limit, allocated int64) {
	t.Helper()
	bucket := quota.BucketName(quota.BucketID{Consumer: quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: kind, Name: name}, ResourceType: w.rt})
	b := &quotav1alpha1.AllowanceBucket{}
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return w.admin.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: bucket}, b) == nil && b.Status.Limit == limit && b.Status.Allocated == allocated, nil
	}); err != nil {
		t.Fatalf("the bucket of %s %s: limit %d allocated %d; want %d and %d", kind, name, b.Status.Limit, b.Status.Allocated, limit, allocated)
	}
}

func (w *sizingWorld) sizePath(kind, consumer, amount string) string {
	q := url.Values{"organization": {w.org}, "kind": {kind}, "consumer": {consumer}, "resourceType": {w.rt}, "amount": {amount}}
	return "/portal/api/size?" + q.Encode()
}

// TestTheRequestFormSaysHowMuchToAskFor: on the request form, the tenant
// says how much more it needs; the portal answers from a QuotaReview, for
// the project and its organization, the limit each would need — fits,
// short at the project (a button fills in the limit to ask for), short at
// the organization too (a link to ask for it there) — and nothing is
// taken.
func TestTheRequestFormSaysHowMuchToAskFor(t *testing.T) {
	b := browser(t)
	w := newSizingWorld(t, "size")
	token, _ := quotatest.ServiceAccountToken(t, srv.Config, w.ns, "owner", rmv1alpha1.OrganizationOwnerRole, w.ns)
	tenant := tab(t, b)
	q := url.Values{"org": {w.org}, "kind": {"Project"}, "consumer": {w.project}, "resourceType": {w.rt}}
	signIn(t, tenant, token, "#/request?"+q.Encode())
	projectRow := fmt.Sprintf(`#req-size-levels tr[data-level="Project/%s"]`, w.project)
	orgRow := fmt.Sprintf(`#req-size-levels tr[data-level="Organization/%s"]`, w.org)
	ask := func(n string) {
		t.Helper()
		run(t, tenant, "checking "+n+" more", 20*time.Second,
			chromedp.WaitVisible(chromedp.CSS("#req-need")),
			chromedp.SetValue(chromedp.CSS("#req-need"), n),
			chromedp.Click(chromedp.CSS("#req-size")),
			chromedp.WaitVisible(chromedp.CSS("#req-size-verdict")))
	}

	ask("1")
	waitTextContaining(t, tenant, "#req-size-verdict", 10*time.Second, "fits now")
	waitText(t, tenant, projectRow+" td.needed", "5", 5*time.Second)

	ask("5") // the project needs 9 of its 6; the organization 9 of its 10
	waitText(t, tenant, projectRow+" td.allocated", "4", 5*time.Second)
	waitText(t, tenant, projectRow+" td.needed", "9", 5*time.Second)
	waitText(t, tenant, orgRow+" td.needed", "9", 5*time.Second)
	waitTextContaining(t, tenant, "#req-size-verdict", 5*time.Second, "at least 9", "3 more than now")
	if none, err := chromedp.Run(tenant, chromedp.Evaluate[bool](`document.querySelector('.above-short') === null`)); err != nil || !none {
		t.Fatalf("the organization is not short of 9 of its 10, yet the form says so:\n%s", pageText(tenant))
	}
	run(t, tenant, "using 9", 10*time.Second, chromedp.Click(chromedp.CSS("#req-use")))
	limit, err := chromedp.Run(tenant, chromedp.Value(chromedp.CSS("#req-limit")))
	if err != nil || limit != "9" {
		t.Fatalf("the requested limit after Use 9: %q (%v)", limit, err)
	}
	screenshot(t, tenant, "portal-request-sizing")

	ask("7") // 11: the project is short by 5, the organization by 1
	waitText(t, tenant, projectRow+" td.needed", "11", 5*time.Second)
	waitTextContaining(t, tenant, fmt.Sprintf(`.above-short[data-level="Organization/%s"]`, w.org), 5*time.Second, "needs 11", "Request it for Organization "+w.org)

	// Nothing was taken, and no claim was stored.
	w.waitAllocated(t, "Project", w.project, 6, 4)
	w.waitAllocated(t, "Organization", w.org, 10, 4)
	claims := &quotav1alpha1.ResourceClaimList{}
	if err := w.admin.List(context.Background(), claims, client.InNamespace(w.ns)); err != nil || len(claims.Items) != 1 {
		t.Fatalf("claims in %s after sizing: %d (%v); want only vm-1", w.ns, len(claims.Items), err)
	}
}

// TestSizingAnswersOnlyTheOrganizationsOwners: the sizing endpoint answers
// an owner of another organization as it answers a name that does not
// exist (404, the same words), refuses a project of another organization
// named under this one, and says which parameter is wrong.
func TestSizingAnswersOnlyTheOrganizationsOwners(t *testing.T) {
	w := newSizingWorld(t, "sza")
	other := newSizingWorld(t, "szb")
	owner, _ := quotatest.ServiceAccountToken(t, srv.Config, w.ns, "owner", rmv1alpha1.OrganizationOwnerRole, w.ns)
	stranger, _ := quotatest.ServiceAccountToken(t, srv.Config, other.ns, "owner", rmv1alpha1.OrganizationOwnerRole, other.ns)

	resp, body := get(t, w.sizePath("Project", w.project, "3"), owner)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `"needed":7`) || strings.Contains(body, other.org) {
		t.Fatalf("the owner sizing 3 more for its project: %d %s", resp.StatusCode, body)
	}
	notYours, bodyNotYours := get(t, w.sizePath("Project", w.project, "3"), stranger)
	missing, bodyMissing := get(t, strings.Replace(w.sizePath("Project", w.project, "3"), w.project, w.project+"-none", 1), stranger)
	if notYours.StatusCode != http.StatusNotFound || missing.StatusCode != http.StatusNotFound ||
		strings.Replace(bodyMissing, w.project+"-none", w.project, 1) != bodyNotYours || strings.Contains(bodyNotYours, `"needed"`) {
		t.Fatalf("another organization's owner: %d %s; a project that does not exist: %d %s; want the same 404", notYours.StatusCode, bodyNotYours, missing.StatusCode, bodyMissing)
	}
	if resp, body := get(t, w.sizePath("Project", other.project, "3"), owner); resp.StatusCode != http.StatusNotFound || strings.Contains(body, `"needed"`) {
		t.Fatalf("sizing another organization's project under one's own: %d %s; want 404", resp.StatusCode, body)
	}
	if resp, body := get(t, w.sizePath("Project", w.project, "-2"), owner); resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "amount") {
		t.Fatalf("a negative amount: %d %s; want 400 naming amount", resp.StatusCode, body)
	}
	w.waitAllocated(t, "Project", w.project, 6, 4)
	other.waitAllocated(t, "Project", other.project, 6, 4)
}
