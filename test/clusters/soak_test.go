package clusters

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// soakFor bounds the adversary loop; every goroutine of it stops then.
const soakFor = 40 * time.Second

// TestNewSurfacesUnderATenantAdversary runs the new surfaces together — a
// project's control plane, a member cluster with its webhook, quota
// requests with an approval rule — while tenants use them as intended and
// attack them as an adversary would, with real service-account tokens and
// only the shipped roles. Every attack must be refused, no bucket may ever
// show more allocated than its limit, and at the end quotaplane verify is
// clean at the root, in every plane and in the member.
func TestNewSurfacesUnderATenantAdversary(t *testing.T) {
	if testing.Short() {
		t.Skip("the soak runs three processes for about two minutes; -short skips it")
	}
	w := newWorld(t, 4, "east")
	ctx := context.Background()
	admin := w.quota.client
	s := &soak{t: t, w: w}

	// The tenant: organization soak, created by its owner's service
	// account (the controller binds it to quotaplane-organization-owner),
	// with project soak-web, whose member is another service account.
	s.org, s.project = "soak-"+w.f.ID, "soak-web-"+w.f.ID
	mustCreate(t, admin, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "quotaplane-soak-create-organizations"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{rmv1alpha1.GroupName}, Resources: []string{"organizations"}, Verbs: []string{"create"}}}})
	ownerTok, _ := quotatest.ServiceAccountToken(t, w.quota.config, "default", "soak-owner", "quotaplane-soak-create-organizations", "")
	s.owner = quotatest.NewClient(t, quotatest.TokenConfig(w.quota.config, ownerTok))
	org := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: s.org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	eventually(t, 30*time.Second, "the owner creates its organization", func(ctx context.Context) error { return ignoreExists(s.owner.Create(ctx, org)) })
	waitReadyCondition(t, admin, org)
	proj := &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: s.project},
		Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: s.org}}}
	eventually(t, 30*time.Second, "the owner creates its project", func(ctx context.Context) error { return ignoreExists(s.owner.Create(ctx, proj)) })
	waitReadyCondition(t, admin, proj)
	memberTok, _ := quotatest.ServiceAccountToken(t, w.quota.config, "default", "soak-member", "quotaplane-project-member", planes.ProjectNamespace(s.project))
	s.plane = planes.Plane{Kind: planes.Projects, Name: s.project}
	s.memberCfg = planes.ConfigFor(quotatest.TokenConfig(w.quota.config, memberTok), s.plane)
	s.memberKube = kubernetes.NewForConfigOrDie(s.memberCfg)
	s.memberClient = quotatest.NewClient(t, s.memberCfg)

	// Secrets labelled soak=plane in a project's plane charge the project,
	// capped by its organization.
	s.rt = w.f.ID + ".example.com/plane-secrets"
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: w.f.ID + "-plane-secrets"}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType:        quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
		ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}},
		Type:                quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(s.rt), BaseUnit: "secret",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "Secret"}}}}
	mustCreate(t, admin, reg)
	w.f.WaitCondition(reg, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	s.grant(rmv1alpha1.GroupName, "Organization", s.org, 8)
	s.grant(rmv1alpha1.GroupName, "Project", s.project, 3)
	ccp := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.f.ID + "-plane-secrets"}}
	ccp.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Secret"}
	ccp.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: "trigger.metadata.?labels.soak.orValue('') == 'plane'"}}
	ccp.Spec.Target.ResourceClaimTemplate.Spec.Requests = []quotav1alpha1.ClaimTemplateRequest{{ResourceType: s.rt, Amount: intstr.FromInt32(1)}}
	mustCreate(t, admin, ccp)
	w.f.WaitCondition(ccp, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)

	// Requests: a rule approves up to 6 of the plane's Secrets for the
	// project; another organization's request must never be seen.
	rule := &quotav1alpha1.QuotaApprovalRule{ObjectMeta: metav1.ObjectMeta{Name: "soak-" + w.f.ID}, Spec: quotav1alpha1.QuotaApprovalRuleSpec{
		ResourceTypes: []quotav1alpha1.ResourceType{quotav1alpha1.ResourceType(s.rt)}, Expression: "request.spec.requestedLimit <= 6"}}
	mustCreate(t, admin, rule)
	other := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: "soak-other-" + w.f.ID}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	mustCreate(t, admin, other)
	waitReadyCondition(t, admin, other)
	mustCreate(t, admin, &quotav1alpha1.QuotaRequest{ObjectMeta: metav1.ObjectMeta{Name: "private", Namespace: "organization-" + other.Name},
		Spec: quotav1alpha1.QuotaRequestSpec{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: other.Name},
			ResourceType: w.f.RT("secrets"), RequestedLimit: 50, Justification: "a secret plan of another organization"}})

	// A second credential of east's webhook, as its holder would use it.
	s.webhookToken = tokenOf(t, webhookKubeconfig(t, w.quota, "east"))

	deadline := time.Now().Add(soakFor)
	var wg sync.WaitGroup
	for _, loop := range []func(time.Time){s.planeTenant, s.planeAttacker, s.memberChurn, s.webhookAttacker, s.requester, s.watchLimits} {
		wg.Add(1)
		go func() { defer wg.Done(); loop(deadline) }()
	}
	wg.Wait()
	t.Logf("soak: %d plane creates admitted, %d refused for quota; %d member creates admitted, %d refused; %d attacks refused; %d requests approved",
		s.planeAdmitted.Load(), s.planeRefused.Load(), s.memberAdmitted.Load(), s.memberRefused.Load(), s.attacks.Load(), s.approved.Load())
	if s.planeAdmitted.Load() == 0 || s.memberAdmitted.Load() == 0 || s.attacks.Load() == 0 {
		t.Fatalf("the soak did nothing worth checking: %d plane creates, %d member creates, %d attacks", s.planeAdmitted.Load(), s.memberAdmitted.Load(), s.attacks.Load())
	}

	// Settled: every stored object charged once, nothing else held.
	eventually(t, 90*time.Second, "the plane's and the member's claims match their objects", func(ctx context.Context) error {
		if err := s.planeSettled(ctx); err != nil {
			return err
		}
		return s.memberSettled(ctx)
	})
	for _, args := range [][]string{
		{"verify", "--data-dir", w.quota.dataDir},
		{"verify", "--data-dir", w.quota.dataDir, "--control-plane", "root"},
		{"verify", "--data-dir", w.quota.dataDir, "--control-plane", s.plane.String()},
		{"verify", "--data-dir", w.quota.dataDir, "--control-plane", planes.Plane{Kind: planes.Organizations, Name: s.org}.String()},
		{"verify", "--kubeconfig", w.quota.kubeconfig, "--member-kubeconfig", w.members[0].kubeconfig, "--cluster-name", "east"},
	} {
		out, err := exec.Command(w.bin, args...).CombinedOutput()
		if err != nil {
			t.Errorf("quotaplane %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(rule), rule); err == nil {
		_ = admin.Delete(ctx, rule)
	}
}

type soak struct {
	t  *testing.T
	w  *world
	rt string

	org, project string
	plane        planes.Plane
	owner        client.Client
	memberCfg    *rest.Config
	memberKube   kubernetes.Interface
	memberClient client.Client
	webhookToken string

	planeAdmitted, planeRefused, memberAdmitted, memberRefused, attacks, approved atomic.Int64
	n                                                                             atomic.Int64
}

func (s *soak) name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, s.n.Add(1)) }

func (s *soak) grant(group, kind, name string, amount int64) {
	s.t.Helper()
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "soak-" + strings.ToLower(kind) + "-" + name, Namespace: s.w.f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: group, Kind: kind, Name: name},
		Allowances:  []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(s.rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: amount}}}}}}
	mustCreate(s.t, s.w.quota.client, g)
	s.w.f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
}

// planeTenant uses the project's plane as intended: Secrets created and
// deleted, some refused for quota.
func (s *soak) planeTenant(deadline time.Time) {
	ctx := context.Background()
	secrets := s.memberKube.CoreV1().Secrets("default")
	var live []string
	for time.Now().Before(deadline) {
		if len(live) > 0 && rand.IntN(3) == 0 {
			i := rand.IntN(len(live))
			if err := secrets.Delete(ctx, live[i], metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				s.t.Errorf("the project member deleting its Secret %s in its plane: %v", live[i], err)
			}
			live = append(live[:i], live[i+1:]...)
			continue
		}
		name := s.name("plane")
		_, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"soak": "plane"}}}, metav1.CreateOptions{})
		switch {
		case err == nil:
			s.planeAdmitted.Add(1)
			live = append(live, name)
		case isQuotaRefusal(err):
			s.planeRefused.Add(1)
		default:
			s.t.Errorf("the project member creating Secret %s in its plane: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// planeAttacker is the project member as an adversary: deleting or
// re-marking its plane's claims, posting reviews and reading metrics
// through the plane, reading other organizations' requests.
func (s *soak) planeAttacker(deadline time.Time) {
	ctx := context.Background()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	for time.Now().Before(deadline) {
		claims := &quotav1alpha1.ResourceClaimList{}
		if err := s.memberClient.List(ctx, claims, client.InNamespace(planes.SystemNamespace)); err != nil {
			s.t.Errorf("the project member listing its plane's claims: %v", err)
		}
		for i := range claims.Items {
			c := &claims.Items[i]
			if c.Spec.ResourceRef == nil {
				continue
			}
			// Removing the control-plane mark would let the claim pass
			// for the root's.
			patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:null},"labels":{%q:null}}}`, planes.Annotation, planes.Annotation))
			if err := s.memberClient.Patch(ctx, c.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err == nil {
				got := &quotav1alpha1.ResourceClaim{}
				if s.memberClient.Get(ctx, client.ObjectKeyFromObject(c), got) == nil && got.Annotations[planes.Annotation] != c.Annotations[planes.Annotation] {
					s.t.Errorf("the project member removed the control-plane mark of claim %s", c.Name)
				}
			}
			s.attacks.Add(1)
			err := s.memberClient.Delete(ctx, c, client.Preconditions{UID: &c.UID})
			s.attacks.Add(1)
			if err != nil {
				continue
			}
			// Allowed only for an object already gone: names are never
			// reused by the tenant loop, so a stored object means a live
			// claim was removed.
			if _, gerr := s.memberKube.CoreV1().Secrets(c.Spec.ResourceRef.Namespace).Get(ctx, c.Spec.ResourceRef.Name, metav1.GetOptions{}); gerr == nil {
				s.t.Errorf("the project member deleted claim %s of Secret %s, still stored in its plane", c.Name, c.Spec.ResourceRef.Name)
			}
		}
		// The root's review endpoint, metrics and pprof through the plane.
		for _, path := range []string{"/quota/v1alpha1/clusters/east/review", "/metrics", "/debug/pprof/"} {
			method, body := http.MethodGet, io.Reader(nil)
			if strings.HasSuffix(path, "/review") {
				method, body = http.MethodPost, bytes.NewReader(s.reviewBody("through-plane-"+s.name("x"), "system:masters"))
			}
			req, _ := http.NewRequest(method, s.memberCfg.Host+path, body)
			req.Header.Set("Authorization", "Bearer "+s.memberCfg.BearerToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				s.t.Errorf("%s %s through the plane: %v", method, path, err)
				continue
			}
			_ = resp.Body.Close()
			s.attacks.Add(1)
			if resp.StatusCode != http.StatusNotFound {
				s.t.Errorf("%s %s through the plane of %s answered %d; want 404", method, path, s.project, resp.StatusCode)
			}
		}
		reqs := &quotav1alpha1.QuotaRequestList{}
		s.attacks.Add(1)
		if err := s.memberClient.List(ctx, reqs); err == nil {
			for _, q := range reqs.Items {
				if q.Namespace != "organization-"+s.org {
					s.t.Errorf("the project member of %s read QuotaRequest %s/%s of another organization through its plane", s.project, q.Namespace, q.Name)
				}
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// memberChurn creates and deletes Secrets in member east, through its
// webhook, as the member's administrator.
func (s *soak) memberChurn(deadline time.Time) {
	ctx := context.Background()
	m := s.w.members[0]
	secrets := m.kube.CoreV1().Secrets(s.w.f.NS)
	var live []string
	for time.Now().Before(deadline) {
		if len(live) > 0 && rand.IntN(3) == 0 {
			i := rand.IntN(len(live))
			if err := secrets.Delete(ctx, live[i], metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				s.t.Errorf("deleting Secret %s in east: %v", live[i], err)
			}
			live = append(live[:i], live[i+1:]...)
			continue
		}
		name := s.name("east")
		_, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		switch {
		case err == nil:
			s.memberAdmitted.Add(1)
			live = append(live, name)
		case isQuotaRefusal(err):
			s.memberRefused.Add(1)
		default:
			s.t.Errorf("creating Secret %s in east: %v", name, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// webhookAttacker holds east's webhook credential and tries to speak for
// west, to assert a requester the quota plane must not believe, and to
// delete claims that are not east's.
func (s *soak) webhookAttacker(deadline time.Time) {
	ctx := context.Background()
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	cred := quotatest.NewClient(s.t, quotatest.TokenConfig(s.w.quota.config, s.webhookToken))
	for time.Now().Before(deadline) {
		for _, tc := range []struct {
			cluster string
			groups  string
		}{{"west", "system:authenticated"}, {"east", "system:masters"}} {
			req, _ := http.NewRequest(http.MethodPost, s.w.quota.config.Host+members.ReviewPath(tc.cluster), bytes.NewReader(s.reviewBody("forged-"+s.name(tc.cluster), tc.groups)))
			req.Header.Set("Authorization", "Bearer "+s.webhookToken)
			req.Header.Set("Content-Type", "application/json")
			resp, err := hc.Do(req)
			if err != nil {
				s.t.Errorf("posting a review for %s: %v", tc.cluster, err)
				continue
			}
			s.attacks.Add(1)
			out := &admissionv1.AdmissionReview{}
			_ = json.NewDecoder(resp.Body).Decode(out)
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK && out.Response != nil && out.Response.Allowed {
				s.t.Errorf("east's webhook credential had a review for cluster %s with groups %s admitted", tc.cluster, tc.groups)
			}
		}
		// The plane's claims are not east's to release.
		claims := &quotav1alpha1.ResourceClaimList{}
		if err := cred.List(ctx, claims, client.InNamespace(planes.ProjectNamespace(s.project))); err == nil {
			for i := range claims.Items {
				c := &claims.Items[i]
				s.attacks.Add(1)
				if err := cred.Delete(ctx, c, client.Preconditions{UID: &c.UID}); err == nil && c.Spec.ResourceRef != nil {
					if _, gerr := s.memberKube.CoreV1().Secrets(c.Spec.ResourceRef.Namespace).Get(ctx, c.Spec.ResourceRef.Name, metav1.GetOptions{}); gerr == nil {
						s.t.Errorf("east's webhook credential deleted claim %s of Secret %s, still stored in the plane of %s", c.Name, c.Spec.ResourceRef.Name, s.project)
					}
				}
			}
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// requester is the organization's owner asking for more — within the
// approval rule, then beyond it (pending for staff, withdrawn) — and trying
// to redirect what it asked for or to write the request's grant itself.
func (s *soak) requester(deadline time.Time) {
	ctx := context.Background()
	ns := "organization-" + s.org
	for i := int64(0); time.Now().Before(deadline); i++ {
		limit := 4 + i // the rule approves up to 6; beyond, staff decide
		q := &quotav1alpha1.QuotaRequest{ObjectMeta: metav1.ObjectMeta{Name: s.name("ask"), Namespace: ns},
			Spec: quotav1alpha1.QuotaRequestSpec{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: s.project},
				ResourceType: quotav1alpha1.ResourceType(s.rt), RequestedLimit: limit, Justification: "soak"}}
		// The grant the request will make, taken first.
		s.attacks.Add(1)
		g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "quota-request-" + q.Name, Namespace: ns}, Spec: quotav1alpha1.ResourceGrantSpec{
			ConsumerRef: q.Spec.ConsumerRef, Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(s.rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: 1}}}}}}
		if err := s.owner.Create(ctx, g); err == nil {
			s.t.Errorf("the owner of %s wrote grant %s, a name reserved to its request", s.org, g.Name)
		}
		if err := s.owner.Create(ctx, q); err != nil {
			s.t.Errorf("the owner asking for %d: %v", q.Spec.RequestedLimit, err)
			return
		}
		s.attacks.Add(1)
		patch := []byte(fmt.Sprintf(`{"spec":{"resourceType":%q,"requestedLimit":500}}`, s.w.f.RT("secrets")))
		if err := s.owner.Patch(ctx, q.DeepCopy(), client.RawPatch(types.MergePatchType, patch)); err == nil {
			s.t.Errorf("the owner of %s redirected its request %s after asking", s.org, q.Name)
		}
		want := quotav1alpha1.QuotaRequestApproved
		if limit > 6 {
			want = quotav1alpha1.QuotaRequestWithdrawn
			eventually(s.t, 30*time.Second, "request "+q.Name+" pending", func(ctx context.Context) error {
				got := &quotav1alpha1.QuotaRequest{}
				if err := s.owner.Get(ctx, client.ObjectKeyFromObject(q), got); err != nil {
					return err
				}
				if got.Status.State != quotav1alpha1.QuotaRequestPending {
					return fmt.Errorf("state %q", got.Status.State)
				}
				return nil
			})
			if err := s.owner.Patch(ctx, q.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"withdrawn":true}}`))); err != nil {
				s.t.Errorf("the owner withdrawing %s: %v", q.Name, err)
				return
			}
		}
		eventually(s.t, 30*time.Second, fmt.Sprintf("request %s %s", q.Name, want), func(ctx context.Context) error {
			got := &quotav1alpha1.QuotaRequest{}
			if err := s.owner.Get(ctx, client.ObjectKeyFromObject(q), got); err != nil {
				return err
			}
			if got.Status.State != want {
				return fmt.Errorf("state %q (%s)", got.Status.State, got.Status.Message)
			}
			return nil
		})
		if want == quotav1alpha1.QuotaRequestApproved {
			s.approved.Add(1)
		}
		// What it made is of the type and consumer asked.
		grants := &quotav1alpha1.ResourceGrantList{}
		if err := s.w.quota.client.List(ctx, grants, client.InNamespace(ns), client.MatchingLabels{"quota.miloapis.com/quota-request": q.Name}); err == nil {
			for _, g := range grants.Items {
				if g.Spec.ConsumerRef.Name != s.project || len(g.Spec.Allowances) != 1 || string(g.Spec.Allowances[0].ResourceType) != s.rt {
					s.t.Errorf("request %s made grant %s for %+v", q.Name, g.Name, g.Spec)
				}
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// watchLimits checks, all along, that no bucket shows more allocated than
// its limit.
func (s *soak) watchLimits(deadline time.Time) {
	ctx := context.Background()
	for time.Now().Before(deadline.Add(2 * time.Second)) {
		list := &quotav1alpha1.AllowanceBucketList{}
		for _, ns := range []string{planes.ProjectNamespace(s.project), "organization-" + s.org, s.w.f.BucketNS} {
			if err := s.w.quota.client.List(ctx, list, client.InNamespace(ns)); err != nil {
				s.t.Errorf("listing buckets in %s: %v", ns, err)
				return
			}
			for _, b := range list.Items {
				if b.Status.Allocated > b.Status.Limit {
					s.t.Errorf("bucket %s/%s shows %d allocated against a limit of %d", b.Namespace, b.Name, b.Status.Allocated, b.Status.Limit)
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// planeSettled: the plane's governed Secrets and their claims match one to
// one, and the project's bucket counts them.
func (s *soak) planeSettled(ctx context.Context) error {
	secrets, err := s.memberKube.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{LabelSelector: "soak=plane"})
	if err != nil {
		return err
	}
	claims := &quotav1alpha1.ResourceClaimList{}
	if err := s.w.quota.client.List(ctx, claims, client.InNamespace(planes.ProjectNamespace(s.project))); err != nil {
		return err
	}
	held := map[string]int{}
	for _, c := range claims.Items {
		if c.Spec.ResourceRef != nil && c.Spec.ResourceRef.Kind == "Secret" {
			held[c.Spec.ResourceRef.Name]++
		}
	}
	for _, sec := range secrets.Items {
		if held[sec.Name] != 1 {
			return fmt.Errorf("Secret %s of the plane holds %d claims", sec.Name, held[sec.Name])
		}
	}
	if len(held) != len(secrets.Items) {
		return fmt.Errorf("%d claims in %s for %d stored Secrets", len(held), planes.ProjectNamespace(s.project), len(secrets.Items))
	}
	return nil
}

// memberSettled: east's Secrets and their claims match one to one, and no
// claim was made for west or for a forged review.
func (s *soak) memberSettled(ctx context.Context) error {
	secrets, err := s.w.members[0].kube.CoreV1().Secrets(s.w.f.NS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	stored := map[string]bool{}
	for _, sec := range secrets.Items {
		if strings.HasPrefix(sec.Name, "east-") {
			stored[sec.Name] = true
		}
	}
	claims := &quotav1alpha1.ResourceClaimList{}
	if err := s.w.quota.client.List(ctx, claims, client.HasLabels{members.Label}); err != nil {
		return err
	}
	held := map[string]int{}
	for _, c := range claims.Items {
		if c.Labels[members.Label] != "east" {
			return fmt.Errorf("claim %s/%s is labelled cluster %s: no webhook of that cluster exists", c.Namespace, c.Name, c.Labels[members.Label])
		}
		if c.Spec.ResourceRef == nil {
			continue
		}
		if n := c.Spec.ResourceRef.Name; strings.HasPrefix(n, "forged-") || strings.HasPrefix(n, "through-plane-") {
			return fmt.Errorf("claim %s/%s charges forged object %s", c.Namespace, c.Name, n)
		} else if strings.HasPrefix(n, "east-") {
			held[n]++
		}
	}
	for n := range stored {
		if held[n] != 1 {
			return fmt.Errorf("Secret %s of east holds %d claims", n, held[n])
		}
	}
	if len(held) != len(stored) {
		return fmt.Errorf("%d claims for east's %d stored Secrets", len(held), len(stored))
	}
	return nil
}

// reviewBody is an AdmissionReview of a Secret create in the fixture's
// namespace whose requester is in groups.
func (s *soak) reviewBody(name, groups string) []byte {
	obj, _ := json.Marshal(&corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.w.f.NS}})
	body, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: &admissionv1.AdmissionRequest{
		UID: types.UID(name), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Secret"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "secrets"},
		Namespace: s.w.f.NS, Name: name, Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: obj},
		UserInfo: authenticationv1.UserInfo{Username: "mallory", Groups: strings.Split(groups, ",")}}})
	return body
}

// tokenOf is the bearer token of a kubeconfig written by webhookKubeconfig.
func tokenOf(t testing.TB, path string) string {
	t.Helper()
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range raw.AuthInfos {
		if a.Token != "" {
			return a.Token
		}
	}
	t.Fatalf("kubeconfig %s has no token", path)
	return ""
}

func mustCreate(t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, obj.GetName(), err)
	}
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// waitReadyCondition waits until an Organization or a Project is Ready.
func waitReadyCondition(t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	eventually(t, 60*time.Second, obj.GetName()+" Ready", func(ctx context.Context) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *rmv1alpha1.Organization:
			conds = o.Status.Conditions
		case *rmv1alpha1.Project:
			conds = o.Status.Conditions
		}
		for _, c := range conds {
			if c.Type == rmv1alpha1.ConditionReady && c.Status == metav1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("not Ready: %+v", conds)
	})
}
