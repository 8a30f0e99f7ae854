package owning

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
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

// The example owning service under a fleet: 200 Instances of one CPU
// created concurrently over 4 projects, whose organization caps them at 120
// CPUs (each project may use 100). Exactly 120 run (a machine each), 80 wait
// Pending; an increase of 40 starts 40 of the waiting, the oldest first
// (creationTimestamp order), and the next increase every one left; verify
// finds the accounts exact.
func TestTheExampleServiceUnderAnOrganizationsCap(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, admin)
	org := quotatest.Organization(t, admin, "fleet-"+f.ID).Name
	var projects []string
	for i := range 4 {
		projects = append(projects, quotatest.Project(t, admin, fmt.Sprintf("%s-p%d", org, i), org).Name)
	}
	if err := compute.InstallCRD(ctx, apiextensionsclient.NewForConfigOrDie(srv.Config)); err != nil {
		t.Fatal(err)
	}
	for _, rt := range []string{compute.CPUsType, compute.InstancesType} {
		reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: strings.ReplaceAll(strings.TrimPrefix(rt, "compute.example.com/"), "/", "-") + "-" + f.ID},
			Spec: quotav1alpha1.ResourceRegistrationSpec{
				ConsumerType:        quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
				ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}},
				Type:                quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "unit",
				ClaimingResources: []quotav1alpha1.ClaimingResource{{APIGroup: compute.GroupVersion.Group, Kind: "Instance"}}}}
		if err := admin.Create(ctx, reg); err != nil {
			t.Fatal(err)
		}
		f.WaitCondition(reg, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	}
	grant := func(name, kind, consumer string, cpus int64) *quotav1alpha1.ResourceGrant {
		g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: kind, Name: consumer},
			Allowances: []quotav1alpha1.Allowance{
				{ResourceType: compute.CPUsType, Buckets: []quotav1alpha1.GrantBucket{{Amount: cpus}}},
				{ResourceType: compute.InstancesType, Buckets: []quotav1alpha1.GrantBucket{{Amount: 1000}}}}}}
		if err := admin.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
		f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
		return g
	}
	cap := grant("org-cap", "Organization", org, 120)
	for i, p := range projects {
		grant(fmt.Sprintf("p%d", i), "Project", p, 100)
	}

	// The service, in-process: its controller and the claim library.
	me, err := quotaclaim.WhoAmI(ctx, srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(srv.Config, ctrl.Options{Scheme: compute.NewScheme(), Metrics: server.Options{BindAddress: "0"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := compute.Setup(mgr, versioned.NewForConfigOrDie(srv.Config), me); err != nil {
		t.Fatal(err)
	}
	mctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = mgr.Start(mctx) }()

	const n = 200
	cl, err := client.New(srv.Config, client.Options{Scheme: compute.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	quotatest.ForEach(t, n, func(i int) error {
		return cl.Create(ctx, &compute.Instance{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("vm-%03d", i), Namespace: f.NS},
			Spec: compute.InstanceSpec{Organization: org, Project: projects[i%4], CPUs: 1}})
	})
	phases := func(running, pending int) []compute.Instance {
		t.Helper()
		var last string
		var items []compute.Instance
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
			list := &compute.InstanceList{}
			if err := cl.List(ctx, list, client.InNamespace(f.NS)); err != nil {
				return false, nil
			}
			r, p := 0, 0
			for _, inst := range list.Items {
				switch inst.Status.Phase {
				case "Running":
					r++
				case "Pending":
					// Waiting, once its claim is denied (not merely undecided).
					if c := meta.FindStatusCondition(inst.Status.Conditions, quotaclaim.ConditionQuotaGranted); c != nil && c.Status == metav1.ConditionFalse {
						p++
					}
				}
			}
			last, items = fmt.Sprintf("%d running, %d pending of %d", r, p, len(list.Items)), list.Items
			return r == running && p == pending, nil
		})
		if err != nil {
			t.Fatalf("want %d running and %d pending; %s", running, pending, last)
		}
		return items
	}
	before := phases(120, 80)
	machines := func(want int) {
		t.Helper()
		list := &corev1.ConfigMapList{}
		if err := cl.List(ctx, list, client.InNamespace(f.NS)); err != nil {
			t.Fatal(err)
		}
		got := 0
		for _, cm := range list.Items {
			if strings.HasSuffix(cm.Name, "-machine") {
				got++
			}
		}
		if got != want {
			t.Fatalf("%d machines provisioned, want %d", got, want)
		}
	}
	machines(120)
	for _, inst := range before {
		if inst.Status.Phase == "Pending" {
			if c := meta.FindStatusCondition(inst.Status.Conditions, quotaclaim.ConditionQuotaGranted); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(inst.Status.Message, "waiting for quota") {
				t.Fatalf("a waiting Instance does not say why: %+v", inst.Status)
			}
		}
	}

	// 40 more: the 40 oldest waiting start.
	f.UpdateGrant(cap, func(g *quotav1alpha1.ResourceGrant) { g.Spec.Allowances[0].Buckets[0].Amount = 160 })
	after := phases(160, 40)
	machines(160)
	claimCreated := map[string]time.Time{}
	claims, err := versioned.NewForConfigOrDie(srv.Config).QuotaV1alpha1().ResourceClaims(f.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range claims.Items {
		claimCreated[c.Labels[quotaclaim.LabelOwnerUID]] = c.CreationTimestamp.Time
	}
	wasPending := map[string]bool{}
	for _, inst := range before {
		wasPending[inst.Name] = inst.Status.Phase == "Pending"
	}
	var started, waiting []time.Time
	for _, inst := range after {
		if !wasPending[inst.Name] {
			continue
		}
		at := claimCreated[string(inst.UID)]
		if inst.Status.Phase == "Running" {
			started = append(started, at)
		} else {
			waiting = append(waiting, at)
		}
	}
	if len(started) != 40 || len(waiting) != 40 {
		t.Fatalf("%d of the waiting started and %d still wait; want 40 and 40", len(started), len(waiting))
	}
	if latest, earliest := slices.MaxFunc(started, time.Time.Compare), slices.MinFunc(waiting, time.Time.Compare); latest.After(earliest) {
		t.Fatalf("a claim created at %v started while one created at %v still waits: not in creationTimestamp order", latest, earliest)
	}

	// Enough for all.
	f.UpdateGrant(cap, func(g *quotav1alpha1.ResourceGrant) { g.Spec.Allowances[0].Buckets[0].Amount = 200 })
	phases(200, 0)
	machines(200)
	quotatest.VerifyClean(t, srv)
}
