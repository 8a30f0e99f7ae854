// Package review tests QuotaReview against the real server: a set of
// objects reviewed as applying them one by one would be admitted, all
// together and at every level, taking nothing (docs/what-if.md).
package review

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
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

// world is one organization with projects and a namespace of ConfigMaps,
// each ConfigMap charging data.cpu cores of a resource type to the Project
// its data.project names, and a level up to the Organization.
type world struct {
	t        *testing.T
	admin    client.Client
	kube     kubernetes.Interface
	quota    versioned.Interface
	org      string
	orgNS    string
	ns       string
	rt       string
	policy   string
	projects []string
}

func newWorld(t *testing.T, projects ...string) *world {
	t.Helper()
	ctx := context.Background()
	w := &world{t: t, admin: quotatest.NewClient(t, srv.Config), kube: kubernetes.NewForConfigOrDie(srv.Config),
		quota: versioned.NewForConfigOrDie(srv.Config), org: uniq("acme")}
	w.orgNS = rmv1alpha1.OrganizationNamespace(w.org)
	w.ns = w.org + "-apps"
	w.rt = fmt.Sprintf("%s.example.com/vcpu", w.org)
	w.create(&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-vcpu"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType:        quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
		ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}},
		Type:                quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(w.rt), BaseUnit: "core",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}}}})
	w.create(&rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: w.org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}})
	w.poll("the organization's namespace", func() bool {
		return w.admin.Get(ctx, client.ObjectKey{Name: w.orgNS}, &corev1.Namespace{}) == nil
	})
	for _, p := range projects {
		name := w.org + "-" + p
		w.create(&rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: w.org}}})
		w.projects = append(w.projects, name)
	}
	w.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}})
	p := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-configmaps"}}
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace == %q && has(trigger.data) && 'project' in trigger.data", w.ns)}}
	p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: "{{ trigger.data.project }}"},
		Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: w.rt, Amount: intstr.FromString("{{ trigger.data.cpu }}")}},
	}
	w.create(p)
	w.policy = p.Name
	return w
}

// ready waits until admission enforces the policy (a dry run of a create
// charging the first project is refused or admitted naming it).
func (w *world) ready() {
	w.t.Helper()
	f := quotatest.NewFixture(w.t, w.admin)
	f.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("configmaps"), w.configMap("probe", w.projects[0], 1), w.policy, 1)
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

// configMap is a ConfigMap charging cpu cores to project.
func (w *world) configMap(name, project string, cpu int) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
		Data: map[string]string{"project": project, "cpu": fmt.Sprint(cpu)}}
}

func (w *world) consumer(kind, name string) quotav1alpha1.ConsumerRef {
	return quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: kind, Name: name}
}

// grant gives consumer amount cores, and waits until it counts.
func (w *world) grant(name string, consumer quotav1alpha1.ConsumerRef, amount int64) {
	w.t.Helper()
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.orgNS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: consumer, Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(w.rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: amount}}}}}}
	w.create(g)
	w.poll("grant "+name+" to be active", func() bool {
		got := &quotav1alpha1.ResourceGrant{}
		return w.admin.Get(context.Background(), client.ObjectKeyFromObject(g), got) == nil &&
			meta.IsStatusConditionTrue(got.Status.Conditions, quotav1alpha1.GrantConditionActive) && got.Status.ObservedGeneration == got.Generation
	})
}

// allocated is a consumer's bucket's allocation, once it shows want
// (want < 0: whatever it shows).
func (w *world) allocated(kind, name string, want int64) int64 {
	w.t.Helper()
	bn := quota.BucketName(quota.BucketID{Consumer: quota.ConsumerID{APIGroup: rmv1alpha1.GroupName, Kind: kind, Name: name}, ResourceType: w.rt})
	b := &quotav1alpha1.AllowanceBucket{}
	w.poll(fmt.Sprintf("bucket of %s %s to show %d allocated", kind, name, want), func() bool {
		return w.admin.Get(context.Background(), client.ObjectKey{Namespace: w.orgNS, Name: bn}, b) == nil && (want < 0 || b.Status.Allocated == want)
	})
	return b.Status.Allocated
}

// claims are the claims of the world's ConfigMaps, wherever the policy
// puts them.
func (w *world) claims() []quotav1alpha1.ResourceClaim {
	w.t.Helper()
	l := &quotav1alpha1.ResourceClaimList{}
	if err := w.admin.List(context.Background(), l); err != nil {
		w.t.Fatal(err)
	}
	var out []quotav1alpha1.ResourceClaim
	for _, c := range l.Items {
		if c.Spec.ResourceRef != nil && c.Spec.ResourceRef.Namespace == w.ns && c.Spec.ResourceRef.Name != "probe" {
			out = append(out, c)
		}
	}
	return out
}

// token is a service account of namespace ns, bound to role there (a
// ClusterRole), authenticated by a real token, once RBAC's cache has the
// binding.
func (w *world) token(ns, name, role string) *rest.Config {
	w.t.Helper()
	tok, _ := quotatest.ServiceAccountToken(w.t, srv.Config, ns, name, role, ns)
	return quotatest.TokenConfig(srv.Config, tok)
}

func mustContain(t *testing.T, s string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(s, p) {
			t.Errorf("%q lacks %q", s, p)
		}
	}
}
