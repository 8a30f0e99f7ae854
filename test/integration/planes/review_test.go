package planes

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/pkg/client/clientset/versioned"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

func review(t *testing.T, objs ...runtime.Object) *quotav1alpha1.QuotaReview {
	t.Helper()
	r := &quotav1alpha1.QuotaReview{}
	for _, o := range objs {
		raw, err := json.Marshal(o)
		must(t, err, "encoding %T", o)
		r.Spec.Objects = append(r.Spec.Objects, runtime.RawExtension{Raw: raw})
	}
	return r
}

func typedSecret(s *corev1.Secret) *corev1.Secret {
	s.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}
	s.Namespace = "default"
	return s
}

// A QuotaReview sent to a project's plane is decided in that plane, as its
// creates would be: the objects charge the plane's project (the policy has
// no consumerRef), an object that exists in that plane is reviewed as its
// update (charged as now: NotCharged) and one that exists only in another
// plane as a create, the
// answer's refusal is the one the member then gets applying it, and the
// review takes nothing. A project member cannot review through its plane
// what it may not charge (another organization's project), nor as another
// user, nor through another project's plane.
func TestAReviewInAPlaneIsDecidedThere(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "rvw", "Secret", "a", "b")
	other := newWorld(t, "rvx", "Secret", "x")
	a, b := w.projects[0], w.projects[1]
	w.grant("Organization", w.org, 4)
	w.grant("Project", a, 3)
	w.grant("Project", b, 3)
	other.grant("Project", other.projects[0], 5)
	for _, name := range []string{"a0", "a1"} {
		_, err := w.planeKube(a).CoreV1().Secrets("default").Create(ctx, w.secret(name), metav1.CreateOptions{})
		must(t, err, "creating %s in project a's plane", name)
	}
	_, err := w.planeKube(b).CoreV1().Secrets("default").Create(ctx, w.secret("b0"), metav1.CreateOptions{})
	must(t, err, "creating b0 in project b's plane")
	projectA := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: a}
	projectB := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: b}
	waitAllocated := func(consumer quotav1alpha1.ConsumerRef, project string, want int64) {
		t.Helper()
		eventually(t, 15*time.Second, consumer.Name+"'s bucket", func(ctx context.Context) error {
			bk, err := bucketIn(ctx, newPlaneClient(t, projectPlane(project)), w.rt, consumer)
			if err != nil {
				return err
			}
			if bk.Status.Allocated != want {
				return fmt.Errorf("allocated %d, want %d", bk.Status.Allocated, want)
			}
			return nil
		})
	}
	waitAllocated(projectA, a, 2)
	waitAllocated(projectB, b, 1)

	memberCfg := planeConfig(memberConfig(t, w.org, a, "rv-dev"), projectPlane(a))
	member := versioned.NewForConfigOrDie(memberCfg)
	got, err := member.QuotaV1alpha1().QuotaReviews().Create(ctx, review(t,
		typedSecret(w.secret("a0")), typedSecret(w.secret("n1")), typedSecret(w.secret("n2"))), metav1.CreateOptions{})
	must(t, err, "the member reviewing three Secrets through its plane")
	st := got.Status
	if len(st.Objects) != 3 || st.Fits || st.Refused != 1 {
		t.Fatalf("the review through plane a: %+v", st)
	}
	if o := st.Objects[0]; o.Operation != "Update" || o.Result != quotav1alpha1.ReviewNotCharged {
		t.Fatalf("a0, which exists in the plane, reviewed as %+v; want an update whose charge does not change (NotCharged)", o)
	}
	if o := st.Objects[1]; o.Operation != "Create" || o.Result != quotav1alpha1.ReviewFits || len(o.Charges) != 1 || o.Charges[0].ConsumerRef.Name != a {
		t.Fatalf("n1 reviewed as %+v; want a create charging project a", o)
	}
	refused := st.Objects[2]
	if refused.Result != quotav1alpha1.ReviewRefused || refused.Reason != quotav1alpha1.ReviewReasonQuotaExceeded || !strings.Contains(refused.Message, a) {
		t.Fatalf("n2 reviewed as %+v; want refused for project a's quota", refused)
	}
	for _, bk := range st.Buckets {
		if bk.ConsumerRef.Kind == "Project" && bk.ConsumerRef.Name != a {
			t.Fatalf("the review through plane a shows the bucket of %s", bk.ConsumerRef.Name)
		}
		if bk.ConsumerRef == projectA && (bk.Allocated != 2 || bk.AllocatedAfter != 3) {
			t.Fatalf("project a's bucket in the answer: %+v; want 2 now, 3 after", bk)
		}
	}

	// Through project b's plane (its administrator), a0 does not exist: a
	// create, charged to project b.
	adminB := versioned.NewForConfigOrDie(planeConfig(srv.Config, projectPlane(b)))
	got, err = adminB.QuotaV1alpha1().QuotaReviews().Create(ctx, review(t, typedSecret(w.secret("a0"))), metav1.CreateOptions{})
	must(t, err, "reviewing a0 through project b's plane")
	if o := got.Status.Objects[0]; o.Operation != "Create" || o.Result != quotav1alpha1.ReviewFits || len(o.Charges) != 1 || o.Charges[0].ConsumerRef != projectB {
		t.Fatalf("a0 through project b's plane: %+v; want a create charging project b", o)
	}

	// The member's attempts outside what it may charge or see.
	foreign := &quotav1alpha1.ResourceClaim{TypeMeta: metav1.TypeMeta{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{Name: "peek", Namespace: "milo-system"},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: other.projects[0]},
			Requests: []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(other.rt), Amount: 1}}}}
	got, err = member.QuotaV1alpha1().QuotaReviews().Create(ctx, review(t, foreign), metav1.CreateOptions{})
	must(t, err, "the member reviewing a claim on another organization's project")
	if o := got.Status.Objects[0]; o.Result != quotav1alpha1.ReviewRefused || o.Reason != quotav1alpha1.ReviewReasonForbidden || len(o.Charges) != 0 {
		t.Fatalf("a claim on another organization's project, reviewed by a member: %+v; want Forbidden, no charges", o)
	}
	if len(got.Status.Buckets) != 0 || strings.Contains(got.Status.Message, "of 5") {
		t.Fatalf("the refused review shows another organization's quota: %+v", got.Status)
	}
	as := review(t, typedSecret(w.secret("n1")))
	as.Spec.User = "system:admin"
	if _, err := member.QuotaV1alpha1().QuotaReviews().Create(ctx, as, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the member reviewing as system:admin: %v; want 403 (impersonate)", err)
	}
	masked := review(t, foreign)
	masked.Spec.User, masked.Spec.Groups = "system:admin", []string{"system:masters"}
	if _, err := member.QuotaV1alpha1().QuotaReviews().Create(ctx, masked, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the member reviewing as system:masters: %v; want 403 (impersonate)", err)
	}
	// The same by the impersonation headers: a plane's users cannot
	// impersonate there either, whatever the request (a review, or a
	// Secret whose claim admission would authorize as the mask).
	// (The API server refuses the group system:masters to every
	// impersonator; the mask is a user the root binds cluster-admin.)
	platformUser := "platform-admin-" + w.id
	must(t, w.admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: platformUser},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: platformUser}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"}}), "binding cluster-admin")
	quotatest.WaitAllowed(t, []kubernetes.Interface{kubernetes.NewForConfigOrDie(srv.Config)}, platformUser, nil,
		&authorizationv1.ResourceAttributes{Verb: "create", Group: quotav1alpha1.GroupName, Resource: "resourceclaims"})
	maskCfg := rest.CopyConfig(memberCfg)
	maskCfg.Impersonate = rest.ImpersonationConfig{UserName: platformUser}
	if _, err := versioned.NewForConfigOrDie(maskCfg).QuotaV1alpha1().QuotaReviews().Create(ctx, review(t, foreign), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the member impersonating system:masters in its plane to review: %v; want 403", err)
	}
	if _, err := kubernetes.NewForConfigOrDie(maskCfg).CoreV1().Secrets("default").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "granted at the root") {
		t.Fatalf("the member impersonating system:masters in its plane: %v; want 403 saying impersonation is granted at the root", err)
	}
	// The platform's administrator, whom the root lets impersonate, still
	// may, in a plane too: the answer is the member's.
	asMember := review(t, foreign)
	asMember.Spec.User = "system:serviceaccount:" + rmv1alpha1.OrganizationNamespace(w.org) + ":rv-dev"
	got, err = versioned.NewForConfigOrDie(planeConfig(srv.Config, projectPlane(a))).QuotaV1alpha1().QuotaReviews().Create(ctx, asMember, metav1.CreateOptions{})
	must(t, err, "the platform reviewing as the member in plane a")
	if o := got.Status.Objects[0]; o.Reason != quotav1alpha1.ReviewReasonForbidden {
		t.Fatalf("the platform reviewing as the member: %+v; want the member's answer (Forbidden)", o)
	}
	intoB := rest.CopyConfig(memberConfig(t, w.org, a, "rv-dev2"))
	if _, err := versioned.NewForConfigOrDie(planeConfig(intoB, projectPlane(b))).QuotaV1alpha1().QuotaReviews().Create(ctx, review(t, typedSecret(w.secret("n1"))), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("project a's member reviewing through project b's plane: %v; want 403", err)
	}

	// Nothing was taken; applying gives what the review said.
	waitAllocated(projectA, a, 2)
	waitAllocated(projectB, b, 1)
	memberKube := kubernetes.NewForConfigOrDie(memberCfg)
	_, err = memberKube.CoreV1().Secrets("default").Create(ctx, w.secret("n1"), metav1.CreateOptions{})
	must(t, err, "the member creating n1, which the review said fits")
	_, err = memberKube.CoreV1().Secrets("default").Create(ctx, w.secret("n2"), metav1.CreateOptions{})
	if err == nil || err.Error() != refused.Message {
		t.Fatalf("creating n2: %v\nthe review said\n  %s", err, refused.Message)
	}
	waitAllocated(projectA, a, 3)
}
