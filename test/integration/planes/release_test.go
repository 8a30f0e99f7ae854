package planes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/timed"
)

// member is a client of project's plane authenticated by a real token of a
// service account bound to the shipped project-member role in the
// project's namespace at the root: the lowest tenant role.
func (w *world) member(project string) kubernetes.Interface {
	w.t.Helper()
	return kubernetes.NewForConfigOrDie(planeConfig(memberConfig(w.t, w.org, project, "dev-"+project), projectPlane(project)))
}

// claimsOf are the claims, at the root, of the object of uid.
func (w *world) claimsOf(ctx context.Context, uid types.UID) ([]quotav1alpha1.ResourceClaim, error) {
	list := &quotav1alpha1.ResourceClaimList{}
	if err := w.admin.List(ctx, list); err != nil {
		return nil, err
	}
	var out []quotav1alpha1.ResourceClaim
	for _, c := range list.Items {
		if c.Annotations[quotav1alpha1.AnnotationResourceUID] == string(uid) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Objects stored in project and organization planes before a
// ClaimCreationPolicy exists are examined, and charged, when it comes into
// force, as at the root: status.existingObjects counts them, the project's
// bucket shows them (beyond its limit: granted, since they exist), the next
// create in the plane is refused, and verify finds the plane consistent.
func TestPolicyInForceChargesObjectsInPlanes(t *testing.T) {
	ctx := context.Background()
	w := newWorldWithoutPolicy(t, "exi", "Secret", "a")
	project := w.projects[0]
	w.grant("Organization", w.org, 20)
	w.grant("Project", project, 3)
	tenant := w.member(project)
	for i := 0; i < 5; i++ {
		_, err := tenant.CoreV1().Secrets("default").Create(ctx, w.secret(fmt.Sprintf("early-%d", i)), metav1.CreateOptions{})
		must(t, err, "creating Secret %d in the project's plane before the policy exists", i)
	}
	orgKube := kubernetes.NewForConfigOrDie(planeConfig(srv.Config, orgPlane(w.org)))
	_, err := orgKube.CoreV1().Secrets("default").Create(ctx, w.secret("org-early"), metav1.CreateOptions{})
	must(t, err, "creating a Secret in the organization's plane before the policy exists")
	// Not chargeable (see below): verify, which judges every plane, would
	// report it in the other tests sharing this server.
	t.Cleanup(func() {
		_ = orgKube.CoreV1().Secrets("default").Delete(context.Background(), "org-early", metav1.DeleteOptions{})
	})

	ccp := w.enforce("Secret")
	var st *quotav1alpha1.ExistingObjectsStatus
	eventually(t, 30*time.Second, "status.existingObjects of the policy's first generation", func(ctx context.Context) error {
		p := &quotav1alpha1.ClaimCreationPolicy{}
		if err := w.admin.Get(ctx, client.ObjectKeyFromObject(ccp), p); err != nil {
			return err
		}
		if st = p.Status.ExistingObjects; st == nil || st.Generation != p.Generation {
			return fmt.Errorf("status.existingObjects %+v", st)
		}
		return nil
	})
	// The organization's plane is examined too: its Secret charges the
	// organization, which the registration does not let claim (as a create
	// there would be refused), and the status says so.
	orgSecret := "Secret default/org-early in control plane " + orgPlane(w.org).String()
	if st.Charged != 5 || st.OverLimit != 2 || st.NotCharged != 1 || st.Objects < 6 || !strings.Contains(st.Message, orgSecret) {
		t.Fatalf("the pass over existing Secrets reported %d examined, %d charged, %d over a limit, %d not charged (%s); want the project plane's 5 Secrets charged, 2 of them beyond its limit of 3, and %s not charged",
			st.Objects, st.Charged, st.OverLimit, st.NotCharged, st.Message, orgSecret)
	}
	pc := newPlaneClient(t, projectPlane(project))
	projectRef := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: project}
	eventually(t, 30*time.Second, "the project's bucket showing its 5 Secrets", func(ctx context.Context) error {
		b, err := bucketIn(ctx, pc, w.rt, projectRef)
		if err != nil {
			return err
		}
		if b.Status.Allocated != 5 || b.Status.Limit != 3 {
			return fmt.Errorf("allocated %d of %d", b.Status.Allocated, b.Status.Limit)
		}
		return nil
	})
	orgRef := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: w.org}
	eventually(t, 30*time.Second, "the organization's bucket showing its project's 5", func(ctx context.Context) error {
		b, err := bucketIn(ctx, newPlaneClient(t, orgPlane(w.org)), w.rt, orgRef)
		if err != nil {
			return err
		}
		if b.Status.Allocated != 5 {
			return fmt.Errorf("allocated %d", b.Status.Allocated)
		}
		return nil
	})
	_, err = tenant.CoreV1().Secrets("default").Create(ctx, w.secret("late"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), quota.RefusalPrefix) {
		t.Errorf("a create in a plane whose existing objects are over its limit: want a quota refusal, got %v", err)
	}
	if r := audit(t, projectPlane(project).String()); len(r.Discrepancies) > 0 {
		var out strings.Builder
		r.Print(&out)
		t.Errorf("verify --control-plane %s after the pass:\n%s", projectPlane(project), out.String())
	}
}

// releaseWait is how long the release tests wait for a deleted object's
// quota to come back at all: a correctness timeout, far above their timed
// bounds, so that a slow release fails as one (timed.Within) and not as a
// release that never came.
const releaseWait = 2 * time.Minute

// A governed Secret deleted in a project's plane by a tenant has its claim
// released within seconds, as at the root.
func TestDeletingAPlaneObjectReleasesItsClaim(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "rel", "Secret", "a")
	project := w.projects[0]
	w.grant("Project", project, 10)
	tenant := w.member(project)
	// That the claim goes is waited for up to releaseWait; how soon is a
	// timed assertion (the issue saw 50-80 s: a release left to a resync).
	// Bound 10 s per delete, at least 5x the CI-load median (docs/benchmarks.md):
	// a median of 76 ms here alone (3 runs of 3 deletes, 13-191 ms).
	const releaseBound = 10 * time.Second
	var took []time.Duration
	for i := 0; i < 3; i++ {
		s, err := tenant.CoreV1().Secrets("default").Create(ctx, w.secret(fmt.Sprintf("r%d", i)), metav1.CreateOptions{})
		must(t, err, "creating Secret %d in the plane", i)
		eventually(t, 10*time.Second, "the Secret's claim written", func(ctx context.Context) error {
			cl, err := w.claimsOf(ctx, s.UID)
			if err != nil || len(cl) != 1 {
				return fmt.Errorf("%d claims (%v)", len(cl), err)
			}
			return nil
		})
		start := time.Now()
		must(t, tenant.CoreV1().Secrets("default").Delete(ctx, s.Name, metav1.DeleteOptions{}), "deleting Secret %s", s.Name)
		eventually(t, releaseWait, "the deleted Secret's claim released", func(ctx context.Context) error {
			cl, err := w.claimsOf(ctx, s.UID)
			if err != nil || len(cl) != 0 {
				return fmt.Errorf("%d claims left (%v)", len(cl), err)
			}
			return nil
		})
		took = append(took, time.Since(start))
		timed.Within(t, "a plane Secret's claim released after its delete", took[i], releaseBound)
	}
	slices.Sort(took)
	t.Logf("a plane object's claim released %v after its delete (median %v)", took, took[len(took)/2])
}

// Deleting a Project whose plane holds charged objects completes by
// itself: the plane's removal releases their claims (nobody deletes claims
// by hand), the Project goes, and its organization's quota is freed.
func TestDeletingAProjectReleasesItsPlanesClaims(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "pgo", "Secret", "a")
	project := w.projects[0]
	w.grant("Organization", w.org, 10)
	w.grant("Project", project, 10)
	tenant := w.member(project)
	var uids []types.UID
	for i := 0; i < 3; i++ {
		s, err := tenant.CoreV1().Secrets("default").Create(ctx, w.secret(fmt.Sprintf("s%d", i)), metav1.CreateOptions{})
		must(t, err, "creating Secret %d in the plane", i)
		uids = append(uids, s.UID)
	}
	_, err := tenant.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{})
	must(t, err, "creating a namespace in the plane")
	s, err := tenant.CoreV1().Secrets("team").Create(ctx, w.secret("t0"), metav1.CreateOptions{})
	must(t, err, "creating a Secret in the plane's namespace team")
	uids = append(uids, s.UID)
	orgClient := newPlaneClient(t, orgPlane(w.org))
	orgRef := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: w.org}
	allocated := func(want int64) func(ctx context.Context) error {
		return func(ctx context.Context) error {
			b, err := bucketIn(ctx, orgClient, w.rt, orgRef)
			if err != nil {
				return err
			}
			if b.Status.Allocated != want {
				return fmt.Errorf("allocated %d", b.Status.Allocated)
			}
			return nil
		}
	}
	eventually(t, 30*time.Second, "the organization's bucket at 4", allocated(4))

	p := &rmv1alpha1.Project{}
	must(t, w.admin.Get(ctx, client.ObjectKey{Name: project}, p), "reading project %s", project)
	must(t, w.admin.Delete(ctx, p), "deleting project %s", project)
	eventually(t, 60*time.Second, "the project gone with nobody deleting its claims", func(ctx context.Context) error {
		err := w.admin.Get(ctx, client.ObjectKey{Name: project}, p)
		if apierrors.IsNotFound(err) {
			return nil
		}
		var left []string
		for _, uid := range uids {
			cl, _ := w.claimsOf(ctx, uid)
			for _, c := range cl {
				left = append(left, c.Namespace+"/"+c.Name)
			}
		}
		return fmt.Errorf("still there (%v); claims left: %v; conditions %+v", err, left, p.Status.Conditions)
	})
	for _, uid := range uids {
		if cl, err := w.claimsOf(ctx, uid); err != nil || len(cl) != 0 {
			t.Errorf("the claims of the removed plane's object %s: %d left (%v)", uid, len(cl), err)
		}
	}
	eventually(t, 30*time.Second, "the organization's bucket freed", allocated(0))
}

// A governed object deleted in a plane right after its create — before
// its claim is written — gives its quota back as fast as one deleted later:
// the bucket shows nothing allocated and no claim is left, well within
// releaseAtOnceBound.
func TestCreatedAndDeletedAtOnceInAPlane(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "once", "Secret", "a")
	project := w.projects[0]
	w.grant("Organization", w.org, 10)
	w.grant("Project", project, 10)
	tenant := w.member(project)
	planeClient := newPlaneClient(t, projectPlane(project))
	ref := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: project}
	// That the quota comes back is waited for up to releaseWait; how soon
	// is a timed assertion (the issue saw 50-80 s). Bound 15 s per delete,
	// at least 5x the CI-load median (docs/benchmarks.md): a median of
	// 127 ms here alone (3 runs of 3 deletes, 57-267 ms).
	const releaseAtOnceBound = 15 * time.Second
	var took []time.Duration
	for i := 0; i < 3; i++ {
		s, err := tenant.CoreV1().Secrets("default").Create(ctx, w.secret(fmt.Sprintf("o%d", i)), metav1.CreateOptions{})
		must(t, err, "creating Secret %d in the plane", i)
		start := time.Now()
		must(t, tenant.CoreV1().Secrets("default").Delete(ctx, s.Name, metav1.DeleteOptions{}), "deleting Secret %s at once", s.Name)
		eventually(t, releaseWait, "the quota of a Secret deleted at once given back", func(ctx context.Context) error {
			cl, err := w.claimsOf(ctx, s.UID)
			if err != nil || len(cl) != 0 {
				return fmt.Errorf("%d claims left (%v)", len(cl), err)
			}
			b, err := bucketIn(ctx, planeClient, w.rt, ref)
			if err != nil {
				return err
			}
			if b.Status.Allocated != 0 {
				return fmt.Errorf("the project's bucket shows %d allocated", b.Status.Allocated)
			}
			return nil
		})
		took = append(took, time.Since(start))
		timed.Within(t, "a plane Secret deleted at once: its quota given back", took[i], releaseAtOnceBound)
	}
	slices.Sort(took)
	t.Logf("a plane object deleted at once gave its quota back %v after its delete (median %v)", took, took[len(took)/2])
}
