package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// planeCreatesOnEveryReplica: Secrets created in a project's control plane,
// each through another replica's plane URL, are charged to the project by
// whichever replica received them: exactly the project's limit is admitted.
func planeCreatesOnEveryReplica(t *testing.T, replicas []*replica) {
	const limit = 12
	ctx := t.Context()
	admin := quotatest.NewClient(t, replicas[0].Config)
	f := quotatest.NewFixture(t, admin)
	org := "rr-" + f.ID
	o := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	mustDo(t, admin.Create(ctx, o), "creating organization %s", org)
	waitTenancyReady(t, admin, o)
	project := org + "-web"
	pr := &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: project},
		Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: org}}}
	mustDo(t, admin.Create(ctx, pr), "creating project %s", project)
	waitTenancyReady(t, admin, pr)
	rt := f.ID + ".example.com/secrets"
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: f.ID}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType:        quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
		ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}},
		Type:                quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "object",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "Secret"}}}}
	mustDo(t, admin.Create(ctx, reg), "registering %s", rt)
	f.WaitCondition(reg, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: project},
		Allowances:  []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: limit}}}}}}
	mustDo(t, admin.Create(ctx, g), "granting the project")
	f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	// No consumerRef: each Secret charges the project whose plane it is in.
	ccp := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: f.ID + "-plane"}}
	ccp.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "Secret"}
	ccp.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.?labels.world.orValue('') == %q", f.ID)}}
	ccp.Spec.Target.ResourceClaimTemplate.Spec.Requests = []quotav1alpha1.ClaimTemplateRequest{{ResourceType: rt, Amount: intstr.FromInt32(1)}}
	mustDo(t, admin.Create(ctx, ccp), "creating the policy")
	f.WaitCondition(ccp, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
	plane := planes.Plane{Kind: planes.Projects, Name: project}
	var kubes []kubernetes.Interface
	for _, r := range replicas {
		kubes = append(kubes, kubernetes.NewForConfigOrDie(planes.ConfigFor(r.Config, plane)))
	}
	secret := func(name string) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"world": f.ID}}}
	}
	// Each replica enforces the policy in the plane before the creates.
	for i, k := range kubes {
		err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			_, err := k.CoreV1().Secrets("default").Create(ctx, secret("probe"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
			return err == nil, nil
		})
		if err != nil {
			t.Fatalf("replica %s does not serve the project's plane", replicas[i].Name)
		}
	}
	time.Sleep(time.Second) // each replica's policy watch has the policy (tens of ms)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range 2 * limit {
		wg.Go(func() {
			_, err := kubes[i%3].CoreV1().Secrets("default").Create(ctx, secret(fmt.Sprintf("p-%d", i)), metav1.CreateOptions{})
			switch {
			case err == nil:
				admitted.Add(1)
			case apierrors.IsForbidden(err):
			default:
				t.Errorf("plane create %d through replica %s: %v", i, replicas[i%3].Name, err)
			}
		})
	}
	wg.Wait()
	if admitted.Load() != limit {
		t.Errorf("%d plane creates admitted through three replicas for the project's limit of %d", admitted.Load(), limit)
	}
	pc := quotatest.NewClient(t, planes.ConfigFor(replicas[0].Config, plane))
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		list := &quotav1alpha1.ResourceClaimList{}
		if err := pc.List(ctx, list, client.InNamespace("milo-system")); err != nil {
			return false, nil
		}
		granted := 0
		for _, c := range list.Items {
			if meta.IsStatusConditionTrue(c.Status.Conditions, quotav1alpha1.ClaimConditionGranted) {
				granted++
			}
		}
		return granted == limit, nil
	})
	if err != nil {
		t.Errorf("the plane does not hold exactly %d granted claims", limit)
	}
}

// memberReviewsOnEveryReplica: a member cluster's reviews posted to each
// replica in turn are decided by the leader: exactly the limit is allowed.
func memberReviewsOnEveryReplica(t *testing.T, replicas []*replica) {
	const limit = 9
	ctx := t.Context()
	admin := quotatest.NewClient(t, replicas[0].Config)
	f := quotatest.NewFixture(t, admin)
	f.SecretsPolicy(limit)
	cluster := "rr-" + strings.ToLower(f.ID)
	mustDo(t, admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: members.Namespace(cluster)}}), "creating the cluster's namespace")
	// The member's user charger is <cluster>:charger in the quota plane,
	// whatever the review sends (members.MemberName): that name may charge
	// the organization.
	charger := cluster + "-charger"
	inPlane := members.MemberName(cluster, charger, true)
	mustDo(t, admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: charger}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{f.Org.APIGroup}, Resources: []string{"organizations"}, ResourceNames: []string{f.Org.Name}, Verbs: []string{"claim"}}}}), "a role charging %s", f.Org.Name)
	mustDo(t, admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: charger},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: inPlane}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: charger}}), "binding %s", inPlane)
	// Each replica's RBAC cache has the binding, and its admission the
	// policy, before the reviews.
	var kubes []kubernetes.Interface
	for _, r := range replicas {
		kubes = append(kubes, r.Client)
	}
	quotatest.WaitBoundOn(t, kubes, inPlane, nil, charger, "")
	time.Sleep(time.Second)
	review := func(name string) []byte {
		secret, _ := json.Marshal(&corev1.Secret{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.NS}})
		b, _ := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{UID: types.UID("uid-" + name), Operation: admissionv1.Create, Namespace: f.NS, Name: name,
				Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Secret"},
				Resource: metav1.GroupVersionResource{Version: "v1", Resource: "secrets"},
				UserInfo: authenticationv1.UserInfo{Username: charger, Groups: []string{"system:authenticated"},
					Extra: map[string]authenticationv1.ExtraValue{members.IdentitiesExtra: {members.IdentitiesMember}}},
				Object: runtime.RawExtension{Raw: secret}}})
		return b
	}
	var allowed atomic.Int64
	var wg sync.WaitGroup
	for i := range 2 * limit {
		wg.Go(func() {
			r := replicas[i%3]
			hc, err := rest.HTTPClientFor(r.Config)
			if err != nil {
				t.Error(err)
				return
			}
			resp, err := hc.Post(r.Config.Host+members.ReviewPath(cluster), "application/json", bytes.NewReader(review(fmt.Sprintf("m-%d", i))))
			if err != nil {
				t.Errorf("review %d through replica %s: %v", i, r.Name, err)
				return
			}
			defer resp.Body.Close()
			out := admissionv1.AdmissionReview{}
			if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&out) != nil || out.Response == nil {
				t.Errorf("review %d through replica %s: %s", i, r.Name, resp.Status)
				return
			}
			if out.Response.Allowed {
				allowed.Add(1)
			} else if out.Response.Result == nil || out.Response.Result.Code != http.StatusForbidden {
				t.Errorf("review %d through replica %s refused, not for quota: %+v", i, r.Name, out.Response.Result)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != limit {
		t.Errorf("%d member reviews allowed through three replicas for a limit of %d", allowed.Load(), limit)
	}
	f.WaitBucket(quotatest.N(limit, limit, 0), "secrets")
}

func mustDo(t *testing.T, err error, what string, args ...any) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", fmt.Sprintf(what, args...), err)
	}
}

// waitTenancyReady waits until an Organization or Project is Ready.
func waitTenancyReady(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, nil
		}
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *rmv1alpha1.Organization:
			conds = o.Status.Conditions
		case *rmv1alpha1.Project:
			conds = o.Status.Conditions
		}
		return meta.IsStatusConditionTrue(conds, rmv1alpha1.ConditionReady), nil
	})
	if err != nil {
		t.Fatalf("%s never became Ready", obj.GetName())
	}
}
