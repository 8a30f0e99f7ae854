package portal

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// tenantOrg is an organization of its own for one test: its namespace, the
// admin's client, and its owner's token.
type tenantOrg struct {
	t        *testing.T
	org, ns  string
	consumer quotav1alpha1.ConsumerRef
	admin    *quotatest.Client
	token    string
}

// newTenantOrg creates the organization prefix<n>, waits for its namespace,
// and makes its owner's service account and token.
func newTenantOrg(t *testing.T, prefix string) *tenantOrg {
	t.Helper()
	ctx := context.Background()
	o := &tenantOrg{t: t, org: fmt.Sprintf("%s%d", prefix, time.Now().UnixNano()%100000), admin: quotatest.NewClient(t, srv.Config)}
	o.ns = rmv1alpha1.OrganizationNamespace(o.org)
	o.consumer = quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: o.org}
	o.must(o.admin.Create(ctx, &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: o.org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}))
	o.must(wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return o.admin.Get(ctx, client.ObjectKey{Name: o.ns}, &corev1.Namespace{}) == nil, nil
	}))
	o.token, _ = quotatest.ServiceAccountToken(t, srv.Config, o.ns, "owner", rmv1alpha1.OrganizationOwnerRole, o.ns)
	return o
}

func (o *tenantOrg) must(err error) {
	o.t.Helper()
	if err != nil {
		o.t.Fatal(err)
	}
}

// register registers a resource type of this organization's own
// (name-<org>) for Organizations and returns it.
func (o *tenantOrg) register(name, unit string) string {
	o.t.Helper()
	rt := "compute.example.com/" + name + "-" + o.org
	o.must(o.admin.Create(context.Background(), &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + o.org},
		Spec: quotav1alpha1.ResourceRegistrationSpec{ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"},
			Type: quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: unit}}))
	return rt
}

// grant gives the organization amount of rt, once the registration is
// active (a moment after it is created).
func (o *tenantOrg) grant(name, rt string, amount int64) *quotav1alpha1.ResourceGrant {
	o.t.Helper()
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.ns}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: o.consumer, Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: amount}}}}}}
	o.must(wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return o.admin.Create(ctx, g.DeepCopy()) == nil, nil
	}))
	return g
}

// claim takes amount of rt for the organization, once it fits.
func (o *tenantOrg) claim(name, rt string, amount int64) {
	o.t.Helper()
	o.must(wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := o.admin.Create(ctx, &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.ns}, Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: o.consumer, Requests: []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(rt), Amount: amount}}}})
		return err == nil, nil
	}))
}

// waitBucket waits until the organization's bucket of rt has limit and
// allocated.
func (o *tenantOrg) waitBucket(rt string, limit, allocated int64) {
	o.t.Helper()
	name := quota.BucketName(quota.BucketID{Consumer: quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: o.org}, ResourceType: rt})
	b := &quotav1alpha1.AllowanceBucket{}
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		return o.admin.Get(ctx, client.ObjectKey{Namespace: o.ns, Name: name}, b) == nil && b.Status.Limit == limit && b.Status.Allocated == allocated, nil
	})
	if err != nil {
		o.t.Fatalf("bucket %s: limit %d allocated %d, want %d of %d: %v", rt, b.Status.Limit, b.Status.Allocated, allocated, limit, err)
	}
}

// requests lists the organization's QuotaRequests.
func (o *tenantOrg) requests() []quotav1alpha1.QuotaRequest {
	o.t.Helper()
	list := &quotav1alpha1.QuotaRequestList{}
	o.must(o.admin.List(context.Background(), list, client.InNamespace(o.ns)))
	return list.Items
}

// requestFormHash is the request form's route for the organization's own
// bucket of rt, as its "Request increase" link makes it.
func (o *tenantOrg) requestFormHash(rt string) string {
	return "#/request?" + url.Values{"org": {o.org}, "kind": {"Organization"}, "consumer": {o.org}, "resourceType": {rt}}.Encode()
}

// goTo moves a signed-in tab to the page at hash, as a link in it would.
func goTo(t *testing.T, ctx context.Context, hash string) {
	t.Helper()
	run(t, ctx, "going to "+hash, 10*time.Second, chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`location.hash = %q`, hash)))
}

// cellsUnderHeadersJS lists every cell of the tenant's requests table that
// does not sit under its column's header (left edge and width within a
// pixel), or is not laid out as a table cell; [] when every one does.
const cellsUnderHeadersJS = `(() => {
  const table = document.querySelector('#requests');
  const heads = [...table.tHead.rows[0].cells];
  const bad = [];
  for (const tr of table.tBodies[0].querySelectorAll('tr[data-request]')) {
    const cells = [...tr.cells];
    if (cells.length !== heads.length) bad.push(tr.dataset.request + ': ' + cells.length + ' cells under ' + heads.length + ' headers');
    cells.forEach((td, i) => {
      const h = heads[i];
      if (!h) return;
      const c = td.getBoundingClientRect(), hr = h.getBoundingClientRect();
      const where = tr.dataset.request + ', column ' + (i + 1) + ' (' + (h.textContent.trim() || 'actions') + ')';
      const display = getComputedStyle(td).display;
      if (display !== 'table-cell') bad.push(where + ': the cell is display:' + display + ', not a table cell');
      if (Math.abs(c.left - hr.left) > 1 || Math.abs(c.width - hr.width) > 1) {
        bad.push(where + ': cell at x=' + Math.round(c.left) + ' width ' + Math.round(c.width) +
          ', header at x=' + Math.round(hr.left) + ' width ' + Math.round(hr.width));
      }
    });
  }
  return bad;
})()`

// TestRequestsTableCellsSitUnderTheirHeaders: in the tenant's "Increase
// requests" table, every cell of every row sits under its column's header.
// The header's who-am-I rule (.who, a flex box) once also matched the
// table's td.who cells ("Requested by", "Decided by"): two flex boxes in a
// row leave the table's grid, share one anonymous cell, and every cell after
// them moved a column left of its header.
func TestRequestsTableCellsSitUnderTheirHeaders(t *testing.T) {
	b := browser(t)
	ctx := context.Background()
	o := newTenantOrg(t, "cols")
	rt := o.register("vcpus", "core")
	o.grant("platform", rt, 10)
	o.waitBucket(rt, 10, 0)
	staffToken, _ := quotatest.ServiceAccountToken(t, srv.Config, "default", "staff-"+o.org, "quotaplane-quota-approver", "")
	tenantAPI := quotatest.NewClient(t, quotatest.TokenConfig(srv.Config, o.token))
	staffAPI := quotatest.NewClient(t, quotatest.TokenConfig(srv.Config, staffToken))

	// Two requests made by the tenant (a service account: a long name in
	// "Requested by"): one permanent, approved in part by staff (a long name
	// in "Decided by"), one temporary and pending.
	ask := func(prefix string, limit int64, d time.Duration) *quotav1alpha1.QuotaRequest {
		qr := &quotav1alpha1.QuotaRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix, Namespace: o.ns}, Spec: quotav1alpha1.QuotaRequestSpec{
			ConsumerRef: o.consumer, ResourceType: quotav1alpha1.ResourceType(rt), RequestedLimit: limit, Justification: "launch week"}}
		if d > 0 {
			qr.Spec.For = &metav1.Duration{Duration: d}
		}
		o.must(tenantAPI.Create(ctx, qr))
		return qr
	}
	permanent := ask("more-", 20, 0)
	cur := permanent.DeepCopy()
	cur.Status.Decision = &quotav1alpha1.QuotaRequestDecision{Verdict: quotav1alpha1.VerdictApprove, GrantedLimit: ptr.To[int64](15)}
	o.must(staffAPI.Status().Patch(ctx, cur, client.MergeFrom(permanent)))
	o.waitBucket(rt, 15, 0)
	temporary := ask("trial-", 30, 168*time.Hour)

	tenant := tab(t, b)
	signIn(t, tenant, o.token, "")
	waitText(t, tenant, fmt.Sprintf(`#requests tr[data-request="%s"] td.state`, permanent.Name), "Approved", 30*time.Second)
	waitText(t, tenant, fmt.Sprintf(`#requests tr[data-request="%s"] td.state`, temporary.Name), "Pending", 10*time.Second)
	// The API writes spec.for back as "168h0m0s"; the table says it as asked.
	waitText(t, tenant, fmt.Sprintf(`#requests tr[data-request="%s"] td.requested .for`, temporary.Name), "for 168h", 10*time.Second)

	bad, err := chromedp.Run(tenant, chromedp.Evaluate[[]string](cellsUnderHeadersJS))
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Errorf("the requests table's cells do not sit under their headers:\n  %s", strings.Join(bad, "\n  "))
	}
	// The header's who-am-I block is still a flex row (name, Sign out).
	if display, err := chromedp.Run(tenant, chromedp.Evaluate[string](`getComputedStyle(document.querySelector('.topbar .who')).display`)); err != nil || display != "flex" {
		t.Errorf("the header's who-am-I block is display:%s (%v), want flex", display, err)
	}
	run(t, tenant, "scrolling to the requests", 5*time.Second,
		chromedp.Evaluate[chromedp.Void](`document.querySelector('#h-requests').scrollIntoView()`))
	screenshot(t, tenant, "portal-tenant-requests")
}

// TestTenantAsksForATemporaryIncrease: the request form asks for a temporary
// increase with a duration (spec.for; blank is permanent). A value that is
// no duration is refused by the form, saying what was typed and what to
// write; one the server refuses (under 10s) shows the server's own field
// error under the field; neither creates anything. 168h creates a request
// whose spec.for, read back through the API, is 168h; blank creates one
// without spec.for.
func TestTenantAsksForATemporaryIncrease(t *testing.T) {
	b := browser(t)
	o := newTenantOrg(t, "temp")
	rt := o.register("vcpus", "core")
	o.grant("platform", rt, 10)
	o.waitBucket(rt, 10, 0)

	tenant := tab(t, b)
	signIn(t, tenant, o.token, o.requestFormHash(rt))
	fill := func(limit, duration string) {
		t.Helper()
		steps := []chromedp.Action[chromedp.Void]{
			chromedp.WaitVisible(chromedp.CSS("#req-for")),
			chromedp.SetValue(chromedp.CSS("#req-limit"), limit),
			chromedp.SetValue(chromedp.CSS("#req-justification"), "launch week"),
		}
		if duration != "" { // a new form's field is blank (chromedp cannot set "")
			steps = append(steps, chromedp.SetValue(chromedp.CSS("#req-for"), duration))
		}
		run(t, tenant, fmt.Sprintf("asking for %s for %q", limit, duration), 30*time.Second,
			append(steps, chromedp.Click(chromedp.CSS("#req-submit")))...)
	}
	nothingCreated := func(after string) {
		t.Helper()
		if got := o.requests(); len(got) != 0 {
			t.Fatalf("after %s, %d requests were created: %+v", after, len(got), got)
		}
	}

	// Not a duration: the form says so itself (the API would answer only
	// that it cannot decode the body).
	fill("20", "3 days")
	waitTextContaining(t, tenant, "#req-for-error", 10*time.Second, `"3 days" is not a duration`, "168h is 7 days", "leave it blank")
	nothingCreated(`"3 days"`)

	// A duration the server refuses: its field error, under the field.
	fill("20", "5s")
	waitTextContaining(t, tenant, "#req-for-error", 15*time.Second, `The server refused "5s"`, "spec.for", "at least 10s", "remove it to ask for a permanent limit")
	waitTextContaining(t, tenant, "#request-form > .error:not(.field-error)", 5*time.Second, "Not sent", "for how long")
	if invalid, err := chromedp.Run(tenant, chromedp.Evaluate[string](`document.querySelector('#req-for').getAttribute('aria-invalid')`)); err != nil || invalid != "true" {
		t.Errorf("#req-for aria-invalid=%q (%v) with the server's error under it, want true", invalid, err)
	}
	nothingCreated(`"5s"`)
	screenshot(t, tenant, "portal-request-temporary")

	// 168h: a temporary increase, created as such.
	fill("20", "168h")
	run(t, tenant, "the request listed", 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#requests tr[data-request] td.state")))
	waitText(t, tenant, "#requests tr[data-request] td.requested .for", "for 168h", 10*time.Second)
	got := o.requests()
	if len(got) != 1 || got[0].Spec.For == nil || got[0].Spec.For.Duration != 168*time.Hour || got[0].Spec.RequestedLimit != 20 {
		t.Fatalf("the request the portal made for 168h: %+v", got)
	}

	// Blank: a permanent request, without spec.for.
	goTo(t, tenant, o.requestFormHash(rt))
	run(t, tenant, "opening a new form", 30*time.Second, chromedp.WaitVisible(chromedp.CSS("#req-for")))
	if v, err := chromedp.Run(tenant, chromedp.Value(chromedp.CSS("#req-for"))); err != nil || v != "" {
		t.Fatalf("a new form's duration is %q (%v), want blank", v, err)
	}
	fill("12", "")
	waitTextThat(t, tenant, "#requests", "two requests", func(s string) bool { return strings.Count(s, "Pending") == 2 }, 30*time.Second)
	for _, qr := range o.requests() {
		if qr.Spec.RequestedLimit == 12 && qr.Spec.For != nil {
			t.Errorf("a request with the duration left blank has spec.for %v, want none (a permanent limit)", qr.Spec.For)
		}
	}
}

// usageJS runs the portal's own usage computation (ui.js, loaded by the
// page) over a table of cases and returns what it says of each.
const usageJS = `import('/portal/ui.js').then((ui) =>
  [[5, 10], [2, 0], [0, 0], [10, 10], [4, 2], [1, 3]].map(([a, l]) => {
    const u = ui.usage(a, l);
    return a + ' of ' + l + ': pct=' + u.pct + ' over=' + u.over + ' text="' + ui.usageText(a, l) + '"';
  }))`

// TestABucketOverALimitOfZero: a bucket with 2 used of a limit of 0 (its
// only grant deleted under usage) says it is over its limit, "over limit: 2
// used of 0", and never reads 100 (as if exactly full) — on the tenant's
// page, on the request form and in the staff view — while an ordinary
// bucket, 5 of 10, still reads 50.
func TestABucketOverALimitOfZero(t *testing.T) {
	b := browser(t)
	ctx := context.Background()
	o := newTenantOrg(t, "zero")
	gone := o.register("gpus", "gpu")
	ordinary := o.register("vcpus", "core")
	g := o.grant("trial", gone, 2)
	o.grant("platform", ordinary, 10)
	o.claim("training", gone, 2)
	o.claim("web", ordinary, 5)
	o.waitBucket(ordinary, 10, 5)
	o.waitBucket(gone, 2, 2)
	o.must(o.admin.Delete(ctx, g))
	o.waitBucket(gone, 0, 2)
	staffToken, _ := quotatest.ServiceAccountToken(t, srv.Config, "default", "staff-"+o.org, "quotaplane-quota-approver", "")

	tenant := tab(t, b)
	signIn(t, tenant, o.token, "")
	waitText(t, tenant, bucketSel("Organization", o.org, gone, "limit"), "0", 30*time.Second)
	waitText(t, tenant, bucketSel("Organization", o.org, gone, "allocated"), "2", 10*time.Second)
	waitText(t, tenant, bucketSel("Organization", o.org, gone, "usage-over"), "over limit: 2 used of 0", 10*time.Second)
	waitText(t, tenant, bucketSel("Organization", o.org, ordinary, "percent"), "50", 10*time.Second)

	// The computation itself, as the page runs it.
	cases, err := chromedp.Run(tenant, chromedp.Evaluate[[]string](usageJS, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		`5 of 10: pct=50 over=false text="50%"`,
		`2 of 0: pct=null over=true text="over limit: 2 used of 0"`,
		`0 of 0: pct=null over=false text=""`,
		`10 of 10: pct=100 over=false text="100%"`,
		`4 of 2: pct=200 over=true text="200%, over limit: 4 used of 2"`,
		`1 of 3: pct=33 over=false text="33%"`,
	}
	if strings.Join(cases, "\n") != strings.Join(want, "\n") {
		t.Errorf("the portal's usage computation:\n  %s\nwant:\n  %s", strings.Join(cases, "\n  "), strings.Join(want, "\n  "))
	}

	// The rendered bucket: no percentage, no "100", its bar full and red,
	// the bar's text for screen readers the same words.
	bucket := fmt.Sprintf(`.bucket[data-consumer="Organization/%s"][data-resource-type="%s"]`, o.org, gone)
	seen, err := chromedp.Run(tenant, chromedp.Evaluate[map[string]string](`(() => {
	  const b = document.querySelector('`+bucket+`');
	  const bar = b.querySelector('.bar'), fill = bar.querySelector('.fill');
	  return { numbers: b.querySelector('.numbers').textContent.replace(/\s+/g, ' ').trim(),
	           percent: String(b.querySelectorAll('.percent').length), bar: bar.getAttribute('aria-valuetext'),
	           fill: fill.className + ' ' + fill.style.width };
	})()`))
	if err != nil {
		t.Fatal(err)
	}
	if seen["percent"] != "0" || strings.Contains(seen["numbers"], "100") || !strings.Contains(seen["numbers"], "over limit: 2 used of 0") {
		t.Errorf("the bucket with 2 used of 0 shows %q (%s percent elements); want \"over limit: 2 used of 0\", no percentage, no 100", seen["numbers"], seen["percent"])
	}
	if seen["bar"] != "2 of 0 (over limit: 2 used of 0)" || seen["fill"] != "fill crit 100%" {
		t.Errorf("its bar: aria-valuetext %q, fill %q; want \"2 of 0 (over limit: 2 used of 0)\", \"fill crit 100%%\"", seen["bar"], seen["fill"])
	}
	ordinaryText, err := chromedp.Run(tenant, chromedp.Text(chromedp.CSS(fmt.Sprintf(`.bucket[data-resource-type="%s"] .numbers`, ordinary))))
	if err != nil || strings.Contains(ordinaryText, "over limit") {
		t.Errorf("the bucket with 5 of 10 shows %q (%v): it is not over its limit", ordinaryText, err)
	}
	screenshot(t, tenant, "portal-limit-zero")

	// The request form's "Now" for that bucket.
	goTo(t, tenant, o.requestFormHash(gone))
	waitText(t, tenant, "#current-allocated", "2 (over limit: 2 used of 0)", 30*time.Second)

	// The staff view: the organization first among those over a limit, its
	// % column saying so rather than 100.
	staff := tab(t, b)
	signIn(t, staff, staffToken, "#/staff")
	row := fmt.Sprintf(`#orgs tr[data-org="%s"]`, o.org)
	waitText(t, staff, row+" td.percent", "over limit", 30*time.Second)
	waitTextContaining(t, staff, row+" td.usage-col", 5*time.Second, "2 / 0")
}
