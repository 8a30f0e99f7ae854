package tenancy

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/applier"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/tools"
)

// syncWorld is what a platform has before a tenant's directory is synced:
// registrations of the tenant's project count and its projects' vCPU, a
// GrantCreationPolicy giving a new organization its projects (the starter
// policies of examples/tenancy), policies charging Projects to their
// organization (the claim kept in the organization's namespace, made a
// moment after the Organization is stored) and ConfigMaps to the project
// their data names, and the namespace the ConfigMaps go in. Everything is
// scoped to one organization name, so tests do not charge each other.
type syncWorld struct {
	t        *testing.T
	admin    client.Client
	org, ns  string
	projects string
	vcpu     string
}

func newSyncWorld(t *testing.T) *syncWorld {
	t.Helper()
	ctx := context.Background()
	w := &syncWorld{t: t, admin: quotatest.NewClient(t, srv.Config), org: uniq("sync")}
	w.ns, w.projects, w.vcpu = w.org+"-apps", w.org+".example.com/projects", w.org+".example.com/vcpu"
	rm := rmv1alpha1.GroupName
	org := quotav1alpha1.ConsumerTypeRef{APIGroup: rm, Kind: "Organization"}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: w.ns}},
		&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-projects"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
			ConsumerType: org, Type: quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(w.projects), BaseUnit: "project",
			ClaimingResources: []quotav1alpha1.ClaimingResource{{APIGroup: rm, Kind: "Project"}}}},
		&quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-vcpu"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
			ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rm, Kind: "Project"}, ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{org},
			Type: quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(w.vcpu), BaseUnit: "core",
			ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}}}},
	}
	for _, o := range objs {
		if err := w.admin.Create(ctx, o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	w.apply(fmt.Sprintf(`apiVersion: quota.miloapis.com/v1alpha1
kind: GrantCreationPolicy
metadata:
  name: %[1]s-organization-projects
spec:
  trigger:
    resource:
      apiVersion: resourcemanager.miloapis.com/v1alpha1
      kind: Organization
    constraints:
    - expression: 'trigger.metadata.name == "%[1]s"'
  target:
    resourceGrantTemplate:
      metadata:
        name: '{{ trigger.metadata.name }}-projects'
        namespace: 'organization-{{ trigger.metadata.name }}'
      spec:
        consumerRef:
          apiGroup: resourcemanager.miloapis.com
          kind: Organization
          name: '{{ trigger.metadata.name }}'
        allowances:
        - resourceType: %[2]s
          buckets:
          - amount: 2
---
apiVersion: quota.miloapis.com/v1alpha1
kind: ClaimCreationPolicy
metadata:
  name: %[1]s-projects-charge-their-organization
spec:
  trigger:
    resource:
      apiVersion: resourcemanager.miloapis.com/v1alpha1
      kind: Project
    constraints:
    - expression: 'trigger.spec.ownerRef.name in ["%[1]s", "%[1]s-probe"]'
  target:
    resourceClaimTemplate:
      metadata:
        generateName: 'project-{{ trigger.metadata.name }}-'
        namespace: 'organization-{{ trigger.spec.ownerRef.name }}'
      spec:
        consumerRef:
          apiGroup: resourcemanager.miloapis.com
          kind: Organization
          name: '{{ trigger.spec.ownerRef.name }}'
        requests:
        - resourceType: %[2]s
          amount: 1
---
apiVersion: quota.miloapis.com/v1alpha1
kind: ClaimCreationPolicy
metadata:
  name: %[1]s-configmaps-charge-their-project
spec:
  trigger:
    resource:
      apiVersion: v1
      kind: ConfigMap
    constraints:
    - expression: 'trigger.metadata.namespace == "%[3]s"'
  target:
    resourceClaimTemplate:
      metadata:
        generateName: '{{ trigger.metadata.name }}-'
      spec:
        consumerRef:
          apiGroup: resourcemanager.miloapis.com
          kind: Project
          name: '{{ trigger.data.project }}'
        requests:
        - resourceType: %[4]s
          amount: '{{ trigger.data.cpu }}'
`, w.org, w.projects, w.ns, w.vcpu))
	f := quotatest.NewFixture(t, w.admin)
	f.WaitCondition(&quotav1alpha1.GrantCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-organization-projects"}}, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
	w.waitInForce()
	return w
}

// waitInForce waits until admission charges with both claim policies (the
// API server's own view of them, not the policies' Ready condition): a dry
// run of a Project of a probe organization, which has no grant, is refused
// for the resource type only the Project policy charges; a dry run of a
// ConfigMap charging a Project that does not exist is refused naming the
// ConfigMap policy. Dry runs take nothing.
func (w *syncWorld) waitInForce() {
	w.t.Helper()
	ctx := context.Background()
	probe := w.org + "-probe"
	if err := w.admin.Create(ctx, newOrganization(probe)); err != nil {
		w.t.Fatal(err)
	}
	a := applier.New(w.t, srv.Config)
	project := applier.Unstructured(w.t, newProject(probe+"-p", probe))
	cm := applier.Unstructured(w.t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: w.ns},
		Data: map[string]string{"project": probe + "-missing", "cpu": "1"}})
	for _, p := range []struct {
		obj  *unstructured.Unstructured
		want string
	}{{project, "of " + w.projects + " for Organization " + probe}, {cm, "ClaimCreationPolicy " + w.org + "-configmaps-charge-their-project charges this ConfigMap"}} {
		var last applier.Answer
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
			last = a.DryRun(ctx, p.obj.DeepCopy())
			return last.Err != nil && strings.Contains(last.Err.Error(), p.want), nil
		})
		if err != nil {
			w.t.Fatalf("admission does not charge a dry run of %s %s as the policy would (want %q): %d %v", p.obj.GetKind(), p.obj.GetName(), p.want, last.Code, last.Err)
		}
	}
}

// apply creates the documents of a multi-document YAML.
func (w *syncWorld) apply(docs string) {
	w.t.Helper()
	for _, u := range decode(w.t, docs) {
		if err := w.admin.Create(context.Background(), u); err != nil {
			w.t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

// tenant is the directory a GitOps tool syncs, in the order a person
// writes it: the Organization, its two Projects, grants naming them (in the
// organization's namespace, made a moment after it is stored), and 20
// ConfigMaps charged to the projects.
func (w *syncWorld) tenant() string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: resourcemanager.miloapis.com/v1alpha1
kind: Organization
metadata:
  name: %s
spec:
  type: Standard
`, w.org)
	for _, p := range []string{"web", "api"} {
		fmt.Fprintf(&b, `---
apiVersion: resourcemanager.miloapis.com/v1alpha1
kind: Project
metadata:
  name: %[1]s-%[2]s
spec:
  ownerRef:
    kind: Organization
    name: %[1]s
`, w.org, p)
	}
	grant := func(name, kind, consumer string, amount int) {
		fmt.Fprintf(&b, `---
apiVersion: quota.miloapis.com/v1alpha1
kind: ResourceGrant
metadata:
  name: %s
  namespace: %s
spec:
  consumerRef:
    apiGroup: resourcemanager.miloapis.com
    kind: %s
    name: %s
  allowances:
  - resourceType: %s
    buckets:
    - amount: %d
`, name, rmv1alpha1.OrganizationNamespace(w.org), kind, consumer, w.vcpu, amount)
	}
	grant("vcpu", "Organization", w.org, 30)
	grant("web-vcpu", "Project", w.org+"-web", 12)
	grant("api-vcpu", "Project", w.org+"-api", 12)
	for i := range 20 {
		p := "web"
		if i%2 == 1 {
			p = "api"
		}
		fmt.Fprintf(&b, `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-%02d
  namespace: %s
data:
  project: %s-%s
  cpu: "1"
`, i, w.ns, w.org, p)
	}
	return b.String()
}

func decode(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	d := yaml.NewYAMLOrJSONDecoder(bytes.NewReader([]byte(docs)), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u.Object); err != nil {
			break
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
	return out
}

// exact waits until every level holds exactly what the tenant's objects
// charge: 2 projects of the organization; 10 cores each project, 20 the
// organization.
func (w *syncWorld) exact() {
	w.t.Helper()
	rm := rmv1alpha1.GroupName
	want := map[quota.BucketID]int64{
		{Consumer: quota.ConsumerID{APIGroup: rm, Kind: "Organization", Name: w.org}, ResourceType: w.projects}: 2,
		{Consumer: quota.ConsumerID{APIGroup: rm, Kind: "Organization", Name: w.org}, ResourceType: w.vcpu}:     20,
		{Consumer: quota.ConsumerID{APIGroup: rm, Kind: "Project", Name: w.org + "-web"}, ResourceType: w.vcpu}: 10,
		{Consumer: quota.ConsumerID{APIGroup: rm, Kind: "Project", Name: w.org + "-api"}, ResourceType: w.vcpu}: 10,
	}
	for id, n := range want {
		b := &quotav1alpha1.AllowanceBucket{}
		key := client.ObjectKey{Namespace: rmv1alpha1.OrganizationNamespace(w.org), Name: quota.BucketName(id)}
		err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			return w.admin.Get(ctx, key, b) == nil && b.Status.Allocated == n, nil
		})
		if err != nil {
			w.t.Errorf("%s of %s: allocated %d (limit %d), want %d", id.ResourceType, id.Consumer.LevelName(), b.Status.Allocated, b.Status.Limit, n)
		}
	}
	claims := &quotav1alpha1.ResourceClaimList{}
	if err := w.admin.List(context.Background(), claims, client.InNamespace(w.ns)); err != nil {
		w.t.Fatal(err)
	}
	if len(claims.Items) != 20 {
		w.t.Errorf("%d claims of the 20 ConfigMaps", len(claims.Items))
	}
}

// TestOneApplyOfATenantAndItsObjects: one `kubectl apply -f` of a single
// file with an Organization, its two Projects, grants naming them and 20
// ConfigMaps charged to the projects exits 0 the first time: the Projects'
// claims wait the moment the organization's namespace (and its starter
// grant) takes to appear, the grants wait for the namespace, the
// ConfigMaps for the quota engine to know the projects. Every level then
// holds exactly what the objects charge.
func TestOneApplyOfATenantAndItsObjects(t *testing.T) {
	kubectl := tools.Require(t, tools.Kubectl)
	w := newSyncWorld(t)
	file := filepath.Join(t.TempDir(), "tenant.yaml")
	if err := os.WriteFile(file, []byte(w.tenant()), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	out, err := exec.Command(kubectl, "--kubeconfig", srv.Kubeconfig, "apply", "-f", file).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply -f tenant.yaml (26 documents): %v\n%s", err, out)
	}
	t.Logf("kubectl apply of 26 documents exited 0 in %s", time.Since(start).Round(time.Millisecond))
	if n := strings.Count(string(out), " created"); n != 26 {
		t.Errorf("%d objects created, want 26:\n%s", n, out)
	}
	w.exact()
}

// TestAppliesInAnyOrderConverge: the same documents in reverse order —
// ConfigMaps before their Projects, grants before the namespace, Projects
// before their Organization — applied as a GitOps tool does (server-side
// apply of everything, then again of what failed, bounded): every refusal
// is 429 or 503 with Retry-After naming what does not exist yet, never a
// 500 or a final 4xx, and the loop converges with every level exact.
func TestAppliesInAnyOrderConverge(t *testing.T) {
	w := newSyncWorld(t)
	docs := decode(t, w.tenant())
	slices.Reverse(docs)
	a := applier.New(t, srv.Config)
	ctx := context.Background()
	pending := docs
	for round := 1; len(pending) > 0; round++ {
		if round > 6 {
			t.Fatalf("%d documents still refused after 5 rounds", len(pending))
		}
		var again []*unstructured.Unstructured
		refused := map[int]int{}
		for _, u := range pending {
			ans := a.Apply(ctx, u.DeepCopy())
			switch {
			case ans.Code >= 200 && ans.Code < 300:
				continue
			case ans.Code != http.StatusTooManyRequests && ans.Code != http.StatusServiceUnavailable:
				t.Fatalf("round %d: %s %s answered %d, not a status clients retry: %v", round, u.GetKind(), u.GetName(), ans.Code, ans.Err)
			case ans.RetryAfter == "":
				t.Fatalf("round %d: %s %s answered %d without Retry-After: %v", round, u.GetKind(), u.GetName(), ans.Code, ans.Err)
			case !strings.Contains(ans.Err.Error(), "does not exist yet") && !strings.Contains(ans.Err.Error(), "retry in a moment"):
				t.Fatalf("round %d: %s %s: %q does not name what is missing", round, u.GetKind(), u.GetName(), ans.Err)
			}
			refused[ans.Code]++
			if round == 1 && u.GetKind() == "Project" {
				mustContain(t, ans.Err, "Organization", w.org, "does not exist yet", "comes first")
			}
			if round == 1 && u.GetKind() == "ConfigMap" && u.GetName() == "app-19" {
				mustContain(t, ans.Err, "Project "+w.org+"-api", "does not exist yet", "nothing was taken")
			}
			if round == 1 && u.GetKind() == "ResourceGrant" {
				mustContain(t, ans.Err, "namespace "+rmv1alpha1.OrganizationNamespace(w.org), "Organization "+w.org, "does not exist yet")
			}
			again = append(again, u)
		}
		t.Logf("round %d: %d applied, %d refused %v", round, len(pending)-len(again), len(again), refused)
		pending = again
		if len(pending) > 0 {
			time.Sleep(time.Second) // Retry-After
		}
	}
	w.exact()
}
