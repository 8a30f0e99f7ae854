package portal

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/timed"
)

// scale is TestStaffViewAtScale's organizations and resource types (one
// bucket each): 600 and 5, 3,000 buckets, more organizations than the
// overview's 500 rows; 1,000 and 10, the 10,000 buckets docs/benchmarks.md
// §14 quotes, with QUOTAPLANE_FULL_SCALE set.
func scale() (orgs, types int) {
	if quotatest.FullScale() {
		return 1000, 10
	}
	return 600, 5
}

// TestStaffViewAtScale: 600 organizations, each with a grant of 5 resource
// types, so 3,000 buckets the engine writes (1,000 and 10,000 at full
// scale, see scale); the staff view's page is loaded from a blank tab until
// its table is usable, three times. The goal, a median under a second at
// full scale, is measured here alone and stated in docs/benchmarks.md §14; the test fails only past a bound 5 times the
// median under .ci/run's load (timed.Within).
func TestStaffViewAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("creates hundreds of organizations and thousands of buckets")
	}
	b := browser(t)
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	scaleOrgs, scaleTypes := scale()
	began := time.Now()
	var types []string
	for i := range scaleTypes {
		rt := fmt.Sprintf("scale.example.com/type-%d", i)
		types = append(types, rt)
		if err := client.IgnoreAlreadyExists(admin.Create(ctx, &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("scale-type-%d", i)},
			Spec: quotav1alpha1.ResourceRegistrationSpec{ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"},
				Type: quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "unit"}})); err != nil {
			t.Fatal(err)
		}
	}
	name := func(i int) string { return fmt.Sprintf("scale-%04d", i) }
	quotatest.ForEach(t, scaleOrgs, func(i int) error {
		return admin.Create(ctx, &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: name(i)}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}})
	})
	quotatest.ForEach(t, scaleOrgs, func(i int) error {
		ns := rmv1alpha1.OrganizationNamespace(name(i))
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			return admin.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}) == nil, nil
		}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
		g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "platform", Namespace: ns}, Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: name(i)}}}
		for k, rt := range types {
			g.Spec.Allowances = append(g.Spec.Allowances, quotav1alpha1.Allowance{ResourceType: quotav1alpha1.ResourceType(rt),
				Buckets: []quotav1alpha1.GrantBucket{{Amount: int64(10 + (i*7+k)%90)}}})
		}
		return admin.Create(ctx, g)
	})
	count := func() int {
		l := &metav1.PartialObjectMetadataList{}
		l.SetGroupVersionKind(quotav1alpha1.SchemeGroupVersion.WithKind("AllowanceBucketList"))
		if err := admin.List(ctx, l); err != nil {
			return -1
		}
		n := 0
		for _, b := range l.Items {
			if strings.HasPrefix(b.Namespace, "organization-scale-") {
				n++
			}
		}
		return n
	}
	if err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 8*time.Minute, true, func(context.Context) (bool, error) {
		return count() >= scaleOrgs*scaleTypes, nil
	}); err != nil {
		t.Fatalf("waiting for %d buckets: %d written", scaleOrgs*scaleTypes, count())
	}
	t.Logf("setup: %d organizations, %d buckets in %s", scaleOrgs, scaleOrgs*scaleTypes, time.Since(began).Round(time.Second))
	// The measurement is against an absolute goal: not beside a soak or a
	// burst of another package (the setup above may share the machine).
	quotatest.Exclusive(t)

	token, _ := quotatest.ServiceAccountToken(t, srv.Config, "default", "staff-scale", "quotaplane-quota-approver", "")
	// The overview the page asks for, timed on its own.
	cfg := rest.AnonymousClientConfig(srv.Config)
	cfg.BearerToken = token
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// The baseline: the same buckets read from the Kubernetes API, as the
	// page would have to without the portal's overview.
	var list, api []time.Duration
	for range 3 {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, srv.Config.Host+"/apis/quota.miloapis.com/v1alpha1/allowancebuckets", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("listing buckets: %v %v", err, resp)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		list = append(list, time.Since(start))
	}
	for range 3 {
		start := time.Now()
		req, _ := http.NewRequest(http.MethodGet, srv.Config.Host+"/portal/api/overview", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("overview: %v %v", err, resp)
		}
		_ = resp.Body.Close()
		api = append(api, time.Since(start))
	}

	staff := tab(t, b)
	signIn(t, staff, token, "#/staff")
	run(t, staff, "the first staff view", time.Minute, chromedp.WaitVisible(chromedp.CSS(`#orgs tr[data-org]`)))
	var loads []time.Duration
	for range 3 {
		run(t, staff, "leaving the page", 10*time.Second, chromedp.Navigate("about:blank"))
		start := time.Now()
		run(t, staff, "loading the staff view", 30*time.Second,
			chromedp.Navigate(portalURL("#/staff")),
			chromedp.WaitVisible(chromedp.CSS(`#orgs tr[data-org]`)))
		loads = append(loads, time.Since(start))
	}
	rows, err := chromedp.Run(staff, chromedp.Evaluate[int](`document.querySelectorAll('#orgs tr[data-org]').length`))
	// The overview answers at most 500 organizations (the page asks with no
	// limit); the rest are counted, not shown.
	if want := min(scaleOrgs, 500); err != nil || rows != want {
		t.Fatalf("the staff table has %d rows (%v); want %d of the %d organizations, the overview's page", rows, err, want, scaleOrgs)
	}
	slices.Sort(loads)
	slices.Sort(api)
	slices.Sort(list)
	t.Logf("staff view with %d organizations and %d buckets: page load to usable %v (median %v); /portal/api/overview %v (median %v); baseline, listing the buckets from the API: %v (median %v); %d rows shown",
		scaleOrgs, scaleOrgs*scaleTypes, loads, loads[1], api, api[1], list, list[1], rows)
	// The goal, a median under 1 s, is measured by this test alone
	// (docs/benchmarks.md §14). Bound 10 s (was 5 s), at least 5x the
	// CI-load median (docs/benchmarks.md): a median of 0.82 s here alone
	// (3 runs: 843, 749, 821 ms), and 1.04-1.25 s seen before under .ci/run.
	timed.Within(t, "staff view at scale: page load to usable, median of 3", loads[1], 10*time.Second)
}
