package bench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/examples/owning-service/compute"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
	"github.com/quotaplane/quotaplane/pkg/quotaclaim"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// BenchmarkApprovedIncreaseToRunning measures, 10 times, the time from
// staff approving an organization owner's QuotaRequest (the status patch)
// to a waiting Instance of the example owning service Running: the request
// controller writes the grant, the engine grants the waiting claim, the
// service provisions and says so.
func BenchmarkApprovedIncreaseToRunning(b *testing.B) {
	ctx := context.Background()
	c := quotatest.NewClient(b, srv.Config)
	f := quotatest.NewFixture(b, c)
	org := quotatest.Organization(b, c, "incr-"+f.ID).Name
	if err := compute.InstallCRD(ctx, apiextensionsclient.NewForConfigOrDie(srv.Config)); err != nil {
		b.Fatal(err)
	}
	for _, rt := range []string{compute.CPUsType, compute.InstancesType} {
		reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", f.ID, len(rt))}, Spec: quotav1alpha1.ResourceRegistrationSpec{
			ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"},
			Type:         quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "unit",
			ClaimingResources: []quotav1alpha1.ClaimingResource{{APIGroup: compute.GroupVersion.Group, Kind: "Instance"}}}}
		if err := c.Create(ctx, reg); err != nil {
			b.Fatal(err)
		}
		f.WaitCondition(reg, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	}
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "base", Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: org},
		Allowances: []quotav1alpha1.Allowance{{ResourceType: compute.CPUsType, Buckets: []quotav1alpha1.GrantBucket{{Amount: 1}}},
			{ResourceType: compute.InstancesType, Buckets: []quotav1alpha1.GrantBucket{{Amount: 100}}}}}}
	if err := c.Create(ctx, g); err != nil {
		b.Fatal(err)
	}
	f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	// The organization's owner, alice, asks; the admin approves.
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	if _, err := kube.RbacV1().RoleBindings("organization-"+org).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice"}}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quotaplane-organization-owner"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	quotatest.WaitBound(b, kube, "alice", nil, "quotaplane-organization-owner", "organization-"+org) // RBAC authorizes from a cache
	aliceCfg := rest.CopyConfig(srv.Config)
	aliceCfg.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{"system:authenticated"}}
	alice := versioned.NewForConfigOrDie(aliceCfg)
	staff := versioned.NewForConfigOrDie(srv.Config)

	me, err := quotaclaim.WhoAmI(ctx, srv.Config)
	if err != nil {
		b.Fatal(err)
	}
	mgr, err := ctrl.NewManager(srv.Config, ctrl.Options{Scheme: compute.NewScheme(), Metrics: server.Options{BindAddress: "0"}})
	if err != nil {
		b.Fatal(err)
	}
	if err := compute.Setup(mgr, staff, me); err != nil {
		b.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = mgr.Start(mctx) }()
	cl, err := client.New(srv.Config, client.Options{Scheme: compute.NewScheme()})
	if err != nil {
		b.Fatal(err)
	}
	phase := func(name, want string) {
		b.Helper()
		if err := wait.PollUntilContextTimeout(ctx, 2*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			inst := &compute.Instance{}
			return cl.Get(ctx, client.ObjectKey{Namespace: f.NS, Name: name}, inst) == nil && inst.Status.Phase == want &&
				(want != "Pending" || meta.IsStatusConditionFalse(inst.Status.Conditions, quotaclaim.ConditionQuotaGranted)), nil
		}); err != nil {
			b.Fatalf("Instance %s never became %s", name, want)
		}
	}
	create := func(name string) {
		b.Helper()
		if err := cl.Create(ctx, &compute.Instance{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS}, Spec: compute.InstanceSpec{Organization: org, CPUs: 1}}); err != nil {
			b.Fatal(err)
		}
	}
	create("holder")
	phase("holder", "Running")
	var took []time.Duration
	for i := range 10 {
		name := fmt.Sprintf("w-%d", i)
		create(name)
		phase(name, "Pending")
		req := &quotav1alpha1.QuotaRequest{ObjectMeta: metav1.ObjectMeta{Name: "more-" + name, Namespace: "organization-" + org},
			Spec: quotav1alpha1.QuotaRequestSpec{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: org},
				ResourceType: compute.CPUsType, RequestedLimit: int64(i + 2), Justification: "one more instance"}}
		if _, err := alice.QuotaV1alpha1().QuotaRequests(req.Namespace).Create(ctx, req, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		patch := fmt.Sprintf(`{"status":{"decision":{"verdict":"Approve","grantedLimit":%d}}}`, i+2)
		began := time.Now()
		if _, err := staff.QuotaV1alpha1().QuotaRequests(req.Namespace).Patch(ctx, req.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
			b.Fatal(err)
		}
		phase(name, "Running")
		took = append(took, time.Since(began))
	}
	slices.Sort(took)
	b.Logf("an approved QuotaRequest to the waiting Instance Running: median %v, min %v, max %v (10)", took[5], took[0], took[9])
	b.ReportMetric(float64(took[5].Microseconds())/1000, "ms-approved-to-running-p50")
}
