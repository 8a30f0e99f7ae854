package selfservice

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/requests"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestApprovalsSurviveAKilledLeader: two serve replicas on one etcd; 16
// requests for one bucket are approved at once, and the replica applying
// them is killed (SIGKILL) midway. The other takes over: every request ends
// Approved, each grant exists once, and the limit is the highest approved,
// never more (the grants sum to exactly the difference).
func TestApprovalsSurviveAKilledLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two replicas")
	}
	quotatest.Exclusive(t)
	bin := quotatest.BuildBinary(t)
	etcdURL := quotatest.StartEtcd(t)
	replicas := []*quotatest.Replica{quotatest.StartReplica(t, bin, "one", etcdURL), quotatest.StartReplica(t, bin, "two", etcdURL)}
	ctx := t.Context()

	var lead, other *quotatest.Replica
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		l, err := replicas[0].Client.CoordinationV1().Leases(engine.DefaultOptions().SystemNamespace).Get(ctx, requests.LeaseName, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		for i, r := range replicas {
			if r.Identity == *l.Spec.HolderIdentity {
				lead, other = r, replicas[1-i]
				return true, nil
			}
		}
		return false, nil
	}); err != nil {
		t.Fatal("no replica holds the request controller's Lease")
	}
	c := quotatest.NewClient(t, other.Config)
	staffCfg := rest.CopyConfig(other.Config)
	staffCfg.Impersonate = rest.ImpersonationConfig{UserName: "staff-bob", Groups: []string{"system:masters"}}
	staff := quotatest.NewClient(t, staffCfg)

	org := uniq("kill")
	ns := rmv1alpha1.OrganizationNamespace(org)
	rt := org + ".example.com/vcpus"
	consumer := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: org}
	for _, obj := range []client.Object{
		&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: org + "-vcpus"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
			ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"},
			Type:         quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "core"}},
		&rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}},
	} {
		if err := c.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	poll := func(what string, timeout time.Duration, ok func() bool) {
		t.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return ok(), nil }); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	poll("the organization's namespace", 30*time.Second, func() bool { return c.Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{}) == nil })
	if err := c.Create(ctx, &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "platform", Namespace: ns}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: consumer, Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: 10}}}}}}); err != nil {
		t.Fatal(err)
	}
	bucketKey := client.ObjectKey{Namespace: ns, Name: quota.BucketName(quota.BucketID{
		Consumer: quota.ConsumerID{APIGroup: consumer.APIGroup, Kind: consumer.Kind, Name: org}, ResourceType: rt})}
	limit := func() int64 {
		b := &quotav1alpha1.AllowanceBucket{}
		if c.Get(ctx, bucketKey, b) != nil {
			return -1
		}
		return b.Status.Limit
	}
	poll("the platform's limit", 30*time.Second, func() bool { return limit() == 10 })

	const n = 16
	targets := rand.Perm(n)
	var names []string
	for _, off := range targets {
		qr := &quotav1alpha1.QuotaRequest{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r%02d", off), Namespace: ns},
			Spec: quotav1alpha1.QuotaRequestSpec{ConsumerRef: consumer, ResourceType: quotav1alpha1.ResourceType(rt),
				RequestedLimit: int64(11 + off), Justification: "load test"}}
		if err := c.Create(ctx, qr); err != nil {
			t.Fatal(err)
		}
		names = append(names, qr.Name)
	}
	list := func() []quotav1alpha1.QuotaRequest {
		l := &quotav1alpha1.QuotaRequestList{}
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return nil
		}
		return l.Items
	}
	count := func(s quotav1alpha1.QuotaRequestState) int {
		k := 0
		for _, q := range list() {
			if q.Status.State == s {
				k++
			}
		}
		return k
	}
	poll("every request pending", 30*time.Second, func() bool { return count(quotav1alpha1.QuotaRequestPending) == n })
	quotatest.ForEach(t, n, func(i int) error {
		qr := &quotav1alpha1.QuotaRequest{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: names[i]}, qr); err != nil {
			return err
		}
		base := qr.DeepCopy()
		qr.Status.Decision = &quotav1alpha1.QuotaRequestDecision{Verdict: quotav1alpha1.VerdictApprove, GrantedLimit: ptr.To(qr.Spec.RequestedLimit)}
		return staff.Status().Patch(ctx, qr, client.MergeFrom(base))
	})
	poll("the first approvals", 30*time.Second, func() bool { return count(quotav1alpha1.QuotaRequestApproved) >= 1 })
	applied := count(quotav1alpha1.QuotaRequestApproved)
	if err := lead.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-lead.Exited
	t.Logf("killed %s with %d of %d requests applied", lead.Name, applied, n)
	poll("every request approved on the surviving replica", 90*time.Second, func() bool { return count(quotav1alpha1.QuotaRequestApproved) == n })

	grants := &quotav1alpha1.ResourceGrantList{}
	if err := c.List(ctx, grants, client.InNamespace(ns), client.HasLabels{quotav1alpha1.LabelQuotaRequest}); err != nil {
		t.Fatal(err)
	}
	byName := map[string]int64{}
	var sum int64
	for _, g := range grants.Items {
		a := g.Spec.Allowances[0].Buckets[0].Amount
		byName[g.Name] = a
		sum += a
	}
	for _, q := range list() {
		if q.Status.Decision.DecidedBy != "staff-bob" {
			t.Errorf("%s decided by %q", q.Name, q.Status.Decision.DecidedBy)
		}
		if g := q.Status.Grant; g != nil {
			if byName[g.Name] != g.Amount {
				t.Errorf("%s: its grant %s holds %d, the request says %d", q.Name, g.Name, byName[g.Name], g.Amount)
			}
			delete(byName, g.Name)
		}
	}
	if len(byName) != 0 {
		t.Errorf("grants no request accounts for: %v", byName)
	}
	if sum != n {
		t.Errorf("the requests' grants sum to %d, want %d (the highest limit approved, %d, less the platform's 10)", sum, n, 10+n)
	}
	poll(fmt.Sprintf("the limit to be %d", 10+n), 30*time.Second, func() bool { return limit() == 10+n })
}
