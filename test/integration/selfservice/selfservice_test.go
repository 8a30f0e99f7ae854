// Package selfservice tests quota requests against the real server: a
// tenant asks, staff decide, the request controller applies, and RBAC keeps
// each side to its part (docs/self-service.md).
package selfservice

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/requests"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

var srv *testserver.Server

func TestMain(m *testing.M) {
	o := quotatest.FastEngineOptions()
	testserver.Main(m, &srv, testserver.Options{Engine: &o})
}

var seq atomic.Int64

func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, time.Now().UnixNano()%1_000_000, seq.Add(1))
}

// world is an organization with a project, a resource type charged to
// Organizations and one charged to Projects, a platform grant of 10 of
// each, the organization's owner (the shipped organization-owner role) and
// a member of staff (the shipped quota-approver role), each a service
// account with a real token.
type world struct {
	t             *testing.T
	admin, tenant client.Client
	staff         client.Client
	staffName     string
	tenantName    string
	org, ns, proj string
	rt, projectRT string
}

func newWorld(t *testing.T) *world {
	t.Helper()
	w := &world{t: t, admin: quotatest.NewClient(t, srv.Config), org: uniq("acme")}
	w.ns = rmv1alpha1.OrganizationNamespace(w.org)
	w.proj = w.org + "-web"
	w.rt, w.projectRT = w.org+".example.com/vcpus", w.org+".example.com/disks"
	for name, kind := range map[string]string{w.rt: "Organization", w.projectRT: "Project"} {
		w.create(&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: strings.ReplaceAll(name, "/", "-")},
			Spec: quotav1alpha1.ResourceRegistrationSpec{
				ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: kind},
				Type:         quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(name), BaseUnit: "unit"}})
	}
	w.create(&rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: w.org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}})
	w.poll("the organization's namespace", func() bool {
		return w.admin.Get(context.Background(), client.ObjectKey{Name: w.ns}, &corev1.Namespace{}) == nil
	})
	w.create(&rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: w.proj},
		Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: w.org}}})
	w.create(w.grantFor("platform", w.consumer("Organization", w.org), w.rt, 10))
	w.create(w.grantFor("platform-web", w.consumer("Project", w.proj), w.projectRT, 10))
	w.tenant, w.tenantName = w.client(quotatest.ServiceAccountToken(t, srv.Config, w.ns, "owner", rmv1alpha1.OrganizationOwnerRole, w.ns))
	w.staff, w.staffName = w.client(quotatest.ServiceAccountToken(t, srv.Config, w.ns, "staff", "quotaplane-quota-approver", ""))
	w.bucket(w.consumer("Organization", w.org), w.rt, func(b *quotav1alpha1.AllowanceBucket) bool { return b.Status.Limit == 10 })
	return w
}

func (w *world) create(obj client.Object) {
	w.t.Helper()
	if err := w.admin.Create(context.Background(), obj); err != nil {
		w.t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func (w *world) poll(what string, ok func() bool) {
	w.t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) { return ok(), nil }); err != nil {
		w.t.Fatalf("waiting for %s: %v", what, err)
	}
}

// client authenticates with a service account's token, once RBAC sees its
// binding.
func (w *world) client(token, user string) (client.Client, string) {
	w.t.Helper()
	cfg := rest.AnonymousClientConfig(srv.Config)
	cfg.BearerToken = token
	c := quotatest.NewClient(w.t, cfg)
	w.poll(user+"'s role", func() bool {
		return c.List(context.Background(), &quotav1alpha1.QuotaRequestList{}, client.InNamespace(w.ns)) == nil
	})
	return c, user
}

func (w *world) consumer(kind, name string) quotav1alpha1.ConsumerRef {
	return quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: kind, Name: name}
}

func (w *world) grantFor(name string, c quotav1alpha1.ConsumerRef, rt string, amount int64) *quotav1alpha1.ResourceGrant {
	return &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: c, Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: amount}}}}}}
}

// bucket waits until the consumer's bucket satisfies ok.
func (w *world) bucket(c quotav1alpha1.ConsumerRef, rt string, ok func(*quotav1alpha1.AllowanceBucket) bool) *quotav1alpha1.AllowanceBucket {
	w.t.Helper()
	name := quota.BucketName(quota.BucketID{Consumer: quota.ConsumerID{APIGroup: c.APIGroup, Kind: c.Kind, Name: c.Name}, ResourceType: rt})
	b := &quotav1alpha1.AllowanceBucket{}
	w.poll("bucket of "+c.Name+" "+rt, func() bool {
		return w.admin.Get(context.Background(), client.ObjectKey{Namespace: w.ns, Name: name}, b) == nil && ok(b)
	})
	return b
}

func (w *world) request(c quotav1alpha1.ConsumerRef, rt string, limit int64) *quotav1alpha1.QuotaRequest {
	return &quotav1alpha1.QuotaRequest{ObjectMeta: metav1.ObjectMeta{GenerateName: "increase-", Namespace: w.ns},
		Spec: quotav1alpha1.QuotaRequestSpec{ConsumerRef: c, ResourceType: quotav1alpha1.ResourceType(rt), RequestedLimit: limit,
			Justification: "launch week", Contact: "ops@acme.example"}}
}

// ask creates a request as the tenant and waits until it is past accepting.
func (w *world) ask(qr *quotav1alpha1.QuotaRequest) *quotav1alpha1.QuotaRequest {
	w.t.Helper()
	if err := w.tenant.Create(context.Background(), qr); err != nil {
		w.t.Fatalf("the tenant asking: %v", err)
	}
	return w.until(qr, func(q *quotav1alpha1.QuotaRequest) bool { return q.Status.State != "" })
}

func (w *world) until(qr *quotav1alpha1.QuotaRequest, ok func(*quotav1alpha1.QuotaRequest) bool) *quotav1alpha1.QuotaRequest {
	w.t.Helper()
	got := &quotav1alpha1.QuotaRequest{}
	w.poll("request "+qr.Name, func() bool {
		return w.admin.Get(context.Background(), client.ObjectKeyFromObject(qr), got) == nil && ok(got)
	})
	return got
}

func (w *world) state(qr *quotav1alpha1.QuotaRequest, s quotav1alpha1.QuotaRequestState) *quotav1alpha1.QuotaRequest {
	w.t.Helper()
	return w.until(qr, func(q *quotav1alpha1.QuotaRequest) bool { return q.Status.State == s })
}

// decide writes a decision as c, through the status subresource.
func (w *world) decide(c client.Client, qr *quotav1alpha1.QuotaRequest, d quotav1alpha1.QuotaRequestDecision) error {
	cur := &quotav1alpha1.QuotaRequest{}
	if err := w.admin.Get(context.Background(), client.ObjectKeyFromObject(qr), cur); err != nil {
		return err
	}
	base := cur.DeepCopy()
	cur.Status.Decision = &d
	return c.Status().Patch(context.Background(), cur, client.MergeFrom(base))
}

func mustContain(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one saying %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%q lacks %q", err.Error(), p)
		}
	}
}

func grantsOf(t *testing.T, c client.Client, ns, request string) []quotav1alpha1.ResourceGrant {
	t.Helper()
	l := &quotav1alpha1.ResourceGrantList{}
	if err := c.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{quotav1alpha1.LabelQuotaRequest: request}); err != nil {
		t.Fatal(err)
	}
	return l.Items
}

// TestApprovedInPart: staff approve less than asked; the grant is the
// difference, the limit rises, and the request records what was asked, what
// was granted, who asked and who decided. Decided, it cannot be changed.
func TestApprovedInPart(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	org := w.consumer("Organization", w.org)
	qr := w.ask(w.request(org, w.rt, 30))
	if qr.Status.State != quotav1alpha1.QuotaRequestPending || qr.Status.RequestedBy != w.tenantName ||
		qr.Status.AtRequest == nil || qr.Status.AtRequest.Limit != 10 {
		t.Fatalf("a new request: %+v", qr.Status)
	}
	// The tenant cannot approve its own request, nor grant itself quota.
	err := w.decide(w.tenant, qr, quotav1alpha1.QuotaRequestDecision{Verdict: quotav1alpha1.VerdictApprove})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant approving: want 403, got %v", err)
	}
	err = w.tenant.Create(ctx, w.grantFor("mine", org, w.rt, 1000))
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the tenant granting its organization quota: want 403, got %v", err)
	}
	// Staff approve 25 of the 30.
	if err := w.decide(w.staff, qr, quotav1alpha1.QuotaRequestDecision{Verdict: quotav1alpha1.VerdictApprove, GrantedLimit: ptr.To[int64](25)}); err != nil {
		t.Fatal(err)
	}
	qr = w.state(qr, quotav1alpha1.QuotaRequestApproved)
	st := qr.Status
	if st.Decision.DecidedBy != w.staffName || st.Decision.DecidedAt == nil || *st.GrantedLimit != 25 || *st.LimitAtDecision != 10 ||
		qr.Spec.RequestedLimit != 30 || st.Grant == nil || st.Grant.Amount != 15 {
		t.Fatalf("approved in part: %+v decision %+v", st, st.Decision)
	}
	gs := grantsOf(t, w.admin, w.ns, qr.Name)
	if len(gs) != 1 || gs[0].Name != requests.GrantName(qr) || gs[0].Spec.Allowances[0].Buckets[0].Amount != 15 {
		t.Fatalf("the request's grants: %+v", gs)
	}
	w.bucket(org, w.rt, func(b *quotav1alpha1.AllowanceBucket) bool { return b.Status.Limit == 25 })
	if !strings.Contains(st.Message, "25 of the 30 asked") {
		t.Errorf("message %q", st.Message)
	}

	// Decided: neither its spec nor its decision changes.
	err = w.tenant.Patch(ctx, qr, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"requestedLimit":3000}}`)))
	mustContain(t, err, "the request is decided and can no longer be changed")
	err = w.decide(w.staff, qr, quotav1alpha1.QuotaRequestDecision{Verdict: quotav1alpha1.VerdictApprove})
	mustContain(t, err, "status.decision is final once made")
	if gs := grantsOf(t, w.admin, w.ns, qr.Name); len(gs) != 1 || gs[0].Spec.Allowances[0].Buckets[0].Amount != 15 {
		t.Fatalf("after the refused edits: %+v", gs)
	}
}

// TestDeniedAndWithdrawn: a denial needs a reason, grants nothing and says
// why; a withdrawn request is left alone; the asker cannot decide its own.
func TestDeniedAndWithdrawn(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	org := w.consumer("Organization", w.org)
	qr := w.ask(w.request(org, w.rt, 100))
	err := w.decide(w.staff, qr, quotav1alpha1.QuotaRequestDecision{Verdict: quotav1alpha1.VerdictDeny})
	mustContain(t, err, "status.decision.reason", "a denial needs a reason")
	if err := w.decide(w.staff, qr, quotav1alpha1.QuotaRequestDecision{Verdict: quotav1alpha1.VerdictDeny, Reason: "not in this quarter"}); err != nil {
		t.Fatal(err)
	}
	qr = w.state(qr, quotav1alpha1.QuotaRequestDenied)
	if qr.Status.Decision.Reason != "not in this quarter" || qr.Status.Decision.DecidedBy != w.staffName || qr.Status.Grant != nil ||
		!strings.Contains(qr.Status.Message, "not in this quarter") {
		t.Fatalf("denied: %+v", qr.Status)
	}
	if gs := grantsOf(t, w.admin, w.ns, qr.Name); len(gs) != 0 {
		t.Fatalf("a denied request made grants: %+v", gs)
	}

	wd := w.ask(w.request(org, w.rt, 40))
	if err := w.tenant.Patch(ctx, wd, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"withdrawn":true}}`))); err != nil {
		t.Fatalf("the tenant withdrawing: %v", err)
	}
	wd = w.state(wd, quotav1alpha1.QuotaRequestWithdrawn)
	err = w.decide(w.staff, wd, quotav1alpha1.QuotaRequestDecision{Verdict: quotav1alpha1.VerdictApprove})
	if err == nil {
		time.Sleep(300 * time.Millisecond)
		if gs := grantsOf(t, w.admin, w.ns, wd.Name); len(gs) != 0 {
			t.Fatalf("a withdrawn request was granted: %+v", gs)
		}
	}
	w.bucket(org, w.rt, func(b *quotav1alpha1.AllowanceBucket) bool { return b.Status.Limit == 10 })

	// Staff who asked cannot decide their own request.
	own := w.request(org, w.rt, 50)
	if err := w.admin.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	own = w.until(own, func(q *quotav1alpha1.QuotaRequest) bool { return q.Status.State != "" })
	adminName := own.Annotations[quotav1alpha1.AnnotationRequestedBy]
	if adminName == "" {
		t.Fatal("serve's admission recorded nobody as the asker")
	}
	err = w.decide(w.admin, own, quotav1alpha1.QuotaRequestDecision{Verdict: quotav1alpha1.VerdictApprove})
	mustContain(t, err, adminName+" asked for this request and cannot decide it")
}

// TestTenantsAreIsolated: a tenant sees neither another organization's
// requests nor its buckets, and cannot ask for another organization's
// project; a forged asker is replaced.
func TestTenantsAreIsolated(t *testing.T) {
	a, b := newWorld(t), newWorld(t)
	ctx := context.Background()
	for what, list := range map[string]client.ObjectList{"requests": &quotav1alpha1.QuotaRequestList{}, "buckets": &quotav1alpha1.AllowanceBucketList{}} {
		if err := a.tenant.List(ctx, list, client.InNamespace(b.ns)); !apierrors.IsForbidden(err) {
			t.Errorf("a tenant listing another organization's %s: want 403, got %v", what, err)
		}
	}
	if err := a.tenant.Create(ctx, b.request(b.consumer("Organization", b.org), b.rt, 99)); !apierrors.IsForbidden(err) {
		t.Errorf("asking in another organization's namespace: want 403, got %v", err)
	}
	err := a.tenant.Create(ctx, a.request(a.consumer("Project", b.proj), a.projectRT, 99))
	if !apierrors.IsInvalid(err) {
		t.Fatalf("asking for another organization's project: want 422, got %v", err)
	}
	mustContain(t, err, "spec.consumerRef.name", "is not a project of organization "+a.org)
	err = a.tenant.Create(ctx, a.request(a.consumer("Project", a.proj), a.rt, 99))
	mustContain(t, err, "spec.resourceType", "is registered for consumers of kind Organization, not Project")

	forged := a.request(a.consumer("Project", a.proj), a.projectRT, 20)
	forged.Annotations = map[string]string{quotav1alpha1.AnnotationRequestedBy: "someone-else"}
	got := a.ask(forged)
	if got.Status.RequestedBy != a.tenantName {
		t.Fatalf("a forged asker: recorded %q, want %q", got.Status.RequestedBy, a.tenantName)
	}
	// A project's request, approved in full, raises the project's limit.
	if err := a.decide(a.staff, got, quotav1alpha1.QuotaRequestDecision{Verdict: quotav1alpha1.VerdictApprove}); err != nil {
		t.Fatal(err)
	}
	a.state(got, quotav1alpha1.QuotaRequestApproved)
	a.bucket(a.consumer("Project", a.proj), a.projectRT, func(b *quotav1alpha1.AllowanceBucket) bool { return b.Status.Limit == 20 })
}

// TestDecreases: a decrease is applied at once by lowering the newest
// request's grant; one below usage is refused, saying by how much.
func TestDecreases(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	org := w.consumer("Organization", w.org)
	up := w.ask(w.request(org, w.rt, 30))
	if err := w.decide(w.staff, up, quotav1alpha1.QuotaRequestDecision{Verdict: quotav1alpha1.VerdictApprove}); err != nil {
		t.Fatal(err)
	}
	up = w.state(up, quotav1alpha1.QuotaRequestApproved)
	w.bucket(org, w.rt, func(b *quotav1alpha1.AllowanceBucket) bool { return b.Status.Limit == 30 })

	claim := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "in-use", Namespace: w.ns}, Spec: quotav1alpha1.ResourceClaimSpec{
		ConsumerRef: org, Requests: []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(w.rt), Amount: 18}}}}
	w.create(claim)
	// The bucket's forecast, from a history of seconds: too little to tell.
	w.bucket(org, w.rt, func(b *quotav1alpha1.AllowanceBucket) bool {
		return b.Status.Allocated == 18 && b.Status.FullIn == "too little history to tell"
	})

	below := w.state(w.ask(w.request(org, w.rt, 12)), quotav1alpha1.QuotaRequestDenied)
	if !strings.Contains(below.Status.Decision.Reason, "below the 18 allocated now, by 6") {
		t.Fatalf("a decrease below usage: %q", below.Status.Decision.Reason)
	}
	down := w.state(w.ask(w.request(org, w.rt, 22)), quotav1alpha1.QuotaRequestApproved)
	if down.Status.Decision.DecidedBy != requests.DecidedByQuotaplane || len(down.Status.ReducedGrants) != 1 || down.Status.ReducedGrants[0].Amount != 12 {
		t.Fatalf("a decrease: %+v", down.Status)
	}
	w.bucket(org, w.rt, func(b *quotav1alpha1.AllowanceBucket) bool { return b.Status.Limit == 22 })
	g := &quotav1alpha1.ResourceGrant{}
	if err := w.admin.Get(ctx, client.ObjectKey{Namespace: w.ns, Name: requests.GrantName(up)}, g); err != nil || g.Spec.Allowances[0].Buckets[0].Amount != 12 {
		t.Fatalf("the increase's grant after the decrease: %v %+v", err, g.Spec)
	}
	// Below the platform's own grant: only staff can.
	deep := w.state(w.ask(w.request(org, w.rt, 5)), quotav1alpha1.QuotaRequestDenied)
	if !strings.Contains(deep.Status.Decision.Reason, "below the 18 allocated") {
		t.Fatalf("%q", deep.Status.Decision.Reason)
	}
}

// TestApprovalRule: a rule approves what it allows and says so; a request
// beyond it waits for staff.
func TestApprovalRule(t *testing.T) {
	w := newWorld(t)
	ctx := context.Background()
	org := w.consumer("Organization", w.org)
	bad := &quotav1alpha1.QuotaApprovalRule{ObjectMeta: metav1.ObjectMeta{Name: "a-broken-" + w.org},
		Spec: quotav1alpha1.QuotaApprovalRuleSpec{Expression: "request.spec.requestedLimit <="}}
	rule := &quotav1alpha1.QuotaApprovalRule{ObjectMeta: metav1.ObjectMeta{Name: "double-" + w.org}, Spec: quotav1alpha1.QuotaApprovalRuleSpec{
		ResourceTypes: []quotav1alpha1.ResourceType{quotav1alpha1.ResourceType(w.rt)},
		Expression:    "organization.spec.type == 'Standard' && request.spec.requestedLimit <= 2 * usage.limit"}}
	w.create(bad)
	w.create(rule)
	t.Cleanup(func() { _ = w.admin.Delete(ctx, rule); _ = w.admin.Delete(ctx, bad) })
	w.poll("the broken rule to say so", func() bool {
		got := &quotav1alpha1.QuotaApprovalRule{}
		return w.admin.Get(ctx, client.ObjectKeyFromObject(bad), got) == nil && len(got.Status.Conditions) == 1 &&
			got.Status.Conditions[0].Status == metav1.ConditionFalse && strings.Contains(got.Status.Conditions[0].Message, "does not compile")
	})

	within := w.state(w.ask(w.request(org, w.rt, 20)), quotav1alpha1.QuotaRequestApproved)
	if within.Status.Decision.Rule != rule.Name || within.Status.Decision.DecidedBy != "rule:"+rule.Name || !strings.Contains(within.Status.Message, "rule:"+rule.Name) {
		t.Fatalf("within the rule: %+v", within.Status.Decision)
	}
	w.bucket(org, w.rt, func(b *quotav1alpha1.AllowanceBucket) bool { return b.Status.Limit == 20 })
	beyond := w.ask(w.request(org, w.rt, 41))
	beyond = w.until(beyond, func(q *quotav1alpha1.QuotaRequest) bool {
		return strings.Contains(q.Status.Message, "waiting for staff")
	})
	if beyond.Status.State != quotav1alpha1.QuotaRequestPending || beyond.Status.Decision != nil {
		t.Fatalf("beyond the rule: %+v", beyond.Status)
	}
}

// TestRefusalLinksToTheRequestForm: a create refused for quota says where
// to ask for more — the portal's request form for that consumer and
// resource type, prefilled.
func TestRefusalLinksToTheRequestForm(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	f.SecretsPolicy(1)
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: f.NS}}); err != nil {
		t.Fatal(err)
	}
	err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: f.NS}})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the second Secret: want 403, got %v", err)
	}
	want := fmt.Sprintf("%s/portal/#/request?consumer=%s&kind=Organization&org=%s&resourceType=%s",
		srv.Config.Host, f.Org.Name, f.Org.Name, strings.ReplaceAll(string(f.RT("secrets")), "/", "%2F"))
	mustContain(t, err, "to ask for a higher limit, open "+want)
}
