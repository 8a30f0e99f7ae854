package verify

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/verify"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestAGrantForAMissingConsumerIsNamedNotRepaired: a grant naming an
// Organization that does not exist (acem-… for acme-…) gives a bucket that
// cannot be stored — its namespace does not exist either. verify names
// that (consumer-missing: the grant, the organization, the one meant), not
// a bucket the engine failed to write; verify --repair leaves it to a
// person instead of starting a new engine term that cannot help; once the
// organization exists, verify is clean.
func TestAGrantForAMissingConsumerIsNamedNotRepaired(t *testing.T) {
	ctx := context.Background()
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	meant := "acme-" + f.ID
	typo := "acem-" + f.ID
	o := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: meant}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	if err := c.Create(ctx, o); err != nil {
		t.Fatal(err)
	}
	f.Register("vcpus")
	f.Org.Name = typo
	g := f.Grant("typo", map[string][]quotatest.Bucket{"vcpus": {{Amount: 8}}})

	names := []string{typo}
	want := []found{{verify.CheckConsumerMissing, typo}}
	r := audit(t, srv, false)
	wantDiscrepancies(t, r, want, names...)
	for _, d := range r.Discrepancies {
		if d.Check != verify.CheckConsumerMissing {
			continue
		}
		for _, s := range []string{"there is no Organization " + typo, "did you mean " + meant + "?", "ResourceGrant " + f.NS + "/" + g.Name} {
			if !strings.Contains(d.Problem, s) {
				t.Errorf("consumer-missing says %q; want it to say %q", d.Problem, s)
			}
		}
	}

	var printed quotatest.SyncBuffer
	rep, actions, err := repairRun(srv, &printed)
	t.Logf("verify --repair printed:\n%s", printed.String())
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range actions {
		if strings.Contains(a.Did, "new term") {
			t.Errorf("verify --repair acted on a grant naming a missing consumer with %q: a new engine term cannot write its bucket", a.Did)
		}
	}
	if !strings.Contains(printed.String(), "leave consumer-missing") {
		t.Errorf("verify --repair did not say it leaves the missing consumer to a person")
	}
	wantDiscrepancies(t, rep, want, names...)

	// The organization created: its namespace appears, the engine writes
	// the bucket, and verify is clean.
	if err := c.Create(ctx, &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: typo}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		return c.Get(ctx, client.ObjectKey{Name: rmv1alpha1.OrganizationNamespace(typo)}, &corev1.Namespace{}) == nil, nil
	}); err != nil {
		t.Fatalf("the namespace of Organization %s: %v", typo, err)
	}
	f.BucketNS = rmv1alpha1.OrganizationNamespace(typo)
	f.WaitBucket(quotatest.N(8, 0, 8), "vcpus")
	wantDiscrepancies(t, audit(t, srv, false), nil, names...)
}
