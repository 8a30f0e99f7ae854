package planes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// tokenConfig is srv's configuration authenticated by a real token of
// service account ns/name, bound to the shipped ClusterRole role in bindIn
// ("" for cluster-wide).
func tokenConfig(t *testing.T, ns, name, role, bindIn string) *rest.Config {
	t.Helper()
	tok, _ := quotatest.ServiceAccountToken(t, srv.Config, ns, name, role, bindIn)
	return quotatest.TokenConfig(srv.Config, tok)
}

// The claims of live objects in a plane stay, whoever asks: a project
// member (a real token bound to the shipped member role) deleting them
// through its plane, one by one or as a collection; the root's
// administrator (system:masters) deleting them at the root; a member
// cluster's webhook credential (the shipped role, cluster-wide); an update
// removing or changing their control-plane mark. The bucket and the stored
// objects agree throughout, and the next create is refused. Once an object
// is deleted, its claim goes: the engine's release passes the guard.
func TestClaimsOfLivePlaneObjectsStay(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "cgd", "Secret", "a")
	project := w.projects[0]
	w.grant("Organization", w.org, 20)
	w.grant("Project", project, 3)
	memberCfg := planeConfig(memberConfig(t, w.org, project, "dev"), projectPlane(project))
	tenant, tenantQuota := kubernetes.NewForConfigOrDie(memberCfg), quotatest.NewClient(t, memberCfg)
	for i := 0; i < 3; i++ {
		_, err := tenant.CoreV1().Secrets("default").Create(ctx, w.secret(fmt.Sprintf("s%d", i)), metav1.CreateOptions{})
		must(t, err, "the member creating Secret %d of 3 in its plane", i)
	}
	var claims []quotav1alpha1.ResourceClaim
	eventually(t, 15*time.Second, "three claims in the plane", func(ctx context.Context) error {
		list := &quotav1alpha1.ResourceClaimList{}
		if err := tenantQuota.List(ctx, list, client.InNamespace(planes.SystemNamespace)); err != nil {
			return err
		}
		if claims = list.Items; len(claims) != 3 {
			return fmt.Errorf("%d claims", len(claims))
		}
		return nil
	})
	plane := projectPlane(project).String()
	refused := func(who string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Fatalf("%s: want 403, got %v", who, err)
		}
		for _, want := range []string{"still stored in control plane " + plane, "Secret default/s", "delete that object"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: the refusal %q does not say %q", who, err, want)
			}
		}
	}

	// (a) The project member, through its plane.
	for i := range claims {
		refused("the member deleting claim "+claims[i].Name, tenantQuota.Delete(ctx, &claims[i]))
	}
	refused("the member deleting every claim of its plane",
		tenantQuota.DeleteAllOf(ctx, &quotav1alpha1.ResourceClaim{}, client.InNamespace(planes.SystemNamespace)))
	// (b) The root's administrator, at the root.
	admin := w.admin
	rootClaim := &quotav1alpha1.ResourceClaim{}
	must(t, admin.Get(ctx, client.ObjectKey{Namespace: planes.ProjectNamespace(project), Name: claims[0].Name}, rootClaim), "reading the claim at the root")
	refused("system:masters deleting the claim at the root", admin.Delete(ctx, rootClaim))
	// Hole 3: a member cluster's webhook credential, bound cluster-wide.
	webhook := quotatest.NewClient(t, tokenConfig(t, "organization-"+w.org, "member-webhook", "quotaplane-member-webhook", ""))
	eventually(t, 10*time.Second, "the webhook credential bound", func(ctx context.Context) error {
		return webhook.List(ctx, &quotav1alpha1.ResourceClaimList{}, client.InNamespace(planes.ProjectNamespace(project)))
	})
	refused("a member webhook's credential deleting the claim", webhook.Delete(ctx, rootClaim.DeepCopy()))

	// (c) The control-plane mark, removed or changed, by the root's
	// administrator; the cluster mark added.
	for what, change := range map[string]func(*quotav1alpha1.ResourceClaim){
		"removing the control-plane mark": func(c *quotav1alpha1.ResourceClaim) { delete(c.Annotations, planes.Annotation) },
		"changing the control-plane mark": func(c *quotav1alpha1.ResourceClaim) { c.Annotations[planes.Annotation] = "projects/elsewhere" },
		"adding a member cluster's mark": func(c *quotav1alpha1.ResourceClaim) {
			if c.Labels == nil {
				c.Labels = map[string]string{}
			}
			c.Labels[members.Label] = "east"
		},
	} {
		c := rootClaim.DeepCopy()
		change(c)
		err := admin.Update(ctx, c)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "nobody adds, changes or removes them") {
			t.Errorf("system:masters %s: want 403 saying the marks never change, got %v", what, err)
		}
	}
	cut := rootClaim.DeepCopy()
	cut.Spec.ResourceRef.Name = "elsewhere"
	refused("system:masters pointing the claim at another object", admin.Update(ctx, cut))

	// Nothing was released: 3 stored, 3 claims, the bucket 3 of 3, the next
	// create refused.
	list := &quotav1alpha1.ResourceClaimList{}
	must(t, tenantQuota.List(ctx, list, client.InNamespace(planes.SystemNamespace)), "listing the plane's claims")
	stored, err := tenant.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{LabelSelector: "world=" + w.id})
	must(t, err, "listing the plane's Secrets")
	consumer := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: project}
	eventually(t, 10*time.Second, "the bucket agreeing with what is stored", func(ctx context.Context) error {
		b, err := bucketIn(ctx, newPlaneClient(t, projectPlane(project)), w.rt, consumer)
		if err != nil {
			return err
		}
		if b.Status.Allocated != int64(len(stored.Items)) || len(list.Items) != len(stored.Items) || len(stored.Items) != 3 {
			return fmt.Errorf("%d Secrets stored, %d claims, the bucket says %d of %d", len(stored.Items), len(list.Items), b.Status.Allocated, b.Status.Limit)
		}
		return nil
	})
	if _, err := tenant.CoreV1().Secrets("default").Create(ctx, w.secret("s3"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a fourth Secret against a limit of 3: want a quota refusal, got %v", err)
	}

	// (e) The object deleted, its claim goes: the engine's release passes.
	must(t, tenant.CoreV1().Secrets("default").Delete(ctx, "s0", metav1.DeleteOptions{}), "deleting Secret s0")
	s0 := stored.Items[0].UID
	for _, s := range stored.Items {
		if s.Name == "s0" {
			s0 = s.UID
		}
	}
	eventually(t, 90*time.Second, "the claim of the deleted Secret released", func(ctx context.Context) error {
		list := &quotav1alpha1.ResourceClaimList{}
		if err := tenantQuota.List(ctx, list, client.InNamespace(planes.SystemNamespace)); err != nil {
			return err
		}
		for _, c := range list.Items {
			if c.Annotations[quotav1alpha1.AnnotationResourceUID] == string(s0) {
				return fmt.Errorf("claim %s still stored", c.Name)
			}
		}
		return nil
	})
	eventually(t, 10*time.Second, "the unit back", func(ctx context.Context) error {
		_, err := tenant.CoreV1().Secrets("default").Create(ctx, w.secret("s3"), metav1.CreateOptions{})
		return err
	})
}
