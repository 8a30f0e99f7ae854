package planes

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// world is an organization with projects, a resource type charged to
// projects (capped by their organization) and claimed by kind, and a
// ClaimCreationPolicy without consumerRef on that kind for objects labelled
// with the world's id.
type world struct {
	t        *testing.T
	admin    client.Client
	id, org  string
	rt       string
	projects []string
	// platformNS is a platform namespace at the root (its grants may name
	// any consumer).
	platformNS string
}

func newWorld(t *testing.T, id, kind string, projects ...string) *world {
	t.Helper()
	w := newWorldWithoutPolicy(t, id, kind, projects...)
	w.enforce(kind)
	return w
}

// newWorldWithoutPolicy is newWorld before its ClaimCreationPolicy exists.
func newWorldWithoutPolicy(t *testing.T, id, kind string, projects ...string) *world {
	t.Helper()
	w := &world{t: t, admin: quotatest.NewClient(t, srv.Config), id: id, org: id, rt: id + ".example.com/" + strings.ToLower(kind) + "s"}
	ctx := context.Background()
	o := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: w.org}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	must(t, w.admin.Create(ctx, o), "creating organization %s", w.org)
	waitReady(t, w.admin, o)
	for _, p := range projects {
		pr := &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: id + "-" + p},
			Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: w.org}}}
		must(t, w.admin.Create(ctx, pr), "creating project %s", pr.Name)
		waitReady(t, w.admin, pr)
		w.projects = append(w.projects, pr.Name)
	}
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType:        quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
		ParentConsumerTypes: []quotav1alpha1.ConsumerTypeRef{{APIGroup: rmv1alpha1.GroupName, Kind: "Organization"}},
		Type:                quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(w.rt), BaseUnit: "object",
		ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: kind}}}}
	must(t, w.admin.Create(ctx, reg), "registering %s", w.rt)
	f := quotatest.NewFixture(t, w.admin)
	w.platformNS = f.NS
	f.WaitCondition(reg, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	return w
}

// enforce creates the world's ClaimCreationPolicy on kind and waits until
// it is Ready.
func (w *world) enforce(kind string) *quotav1alpha1.ClaimCreationPolicy {
	t, id, ctx := w.t, w.id, context.Background()
	t.Helper()
	f := quotatest.NewFixture(t, w.admin)
	// No consumerRef: each object charges the project whose plane it is
	// created in.
	ccp := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: id}}
	ccp.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: kind}
	ccp.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.?labels.world.orValue('') == %q", id)}}
	ccp.Spec.Target.ResourceClaimTemplate.Spec.Requests = []quotav1alpha1.ClaimTemplateRequest{{ResourceType: w.rt, Amount: intstr.FromInt32(1)}}
	must(t, w.admin.Create(ctx, ccp), "creating ClaimCreationPolicy %s", id)
	f.WaitCondition(ccp, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
	return ccp
}

// grant gives consumer (kind Project or Organization) amount of the
// world's resource type, at the root.
func (w *world) grant(kind, name string, amount int64) {
	w.t.Helper()
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: w.id + "-" + name, Namespace: w.platformNS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: kind, Name: name},
		Allowances:  []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(w.rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: amount}}}}}}
	must(w.t, w.admin.Create(context.Background(), g), "granting %d to %s %s", amount, kind, name)
	quotatest.NewFixture(w.t, w.admin).WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
}

// planeKube is an admin client of project's plane.
func (w *world) planeKube(project string) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(planeConfig(srv.Config, projectPlane(project)))
}

func (w *world) secret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"world": w.id}}}
}

func (w *world) configMap(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"world": w.id}}}
}

// bucket reads the bucket of consumer through the plane client cl, in the
// plane's system namespace.
func bucketIn(ctx context.Context, cl client.Client, rt string, consumer quotav1alpha1.ConsumerRef) (*quotav1alpha1.AllowanceBucket, error) {
	list := &quotav1alpha1.AllowanceBucketList{}
	if err := cl.List(ctx, list, client.InNamespace("milo-system")); err != nil {
		return nil, err
	}
	for i := range list.Items {
		b := &list.Items[i]
		if string(b.Spec.ResourceType) == rt && b.Spec.ConsumerRef == consumer {
			return b, nil
		}
	}
	return nil, fmt.Errorf("no bucket of %s for %s %s among %d", rt, consumer.Kind, consumer.Name, len(list.Items))
}

// A GrantCreationPolicy with parentContext gives each project a grant in
// its plane, the bucket appears there, Secrets created in the plane are
// charged to the project up to the limit and refused after, and deleting
// one releases it.
func TestGrantsAndChargesInProjectPlanes(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "gp", "Secret", "a", "b")
	gcp := &quotav1alpha1.GrantCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.id + "-default"}}
	gcp.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: rmv1alpha1.SchemeGroupVersion.String(), Kind: "Project"}
	gcp.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.spec.ownerRef.name == %q", w.org)}}
	gcp.Spec.Target.ParentContext = &quotav1alpha1.ParentContext{APIGroup: rmv1alpha1.GroupName, Kind: "Project", NameExpression: "trigger.metadata.name"}
	gcp.Spec.Target.ResourceGrantTemplate.Metadata.Name = "default-quota"
	gcp.Spec.Target.ResourceGrantTemplate.Metadata.Namespace = "milo-system"
	gcp.Spec.Target.ResourceGrantTemplate.Spec.ConsumerRef = quotav1alpha1.TemplateConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: "{{ trigger.metadata.name }}"}
	gcp.Spec.Target.ResourceGrantTemplate.Spec.Allowances = []quotav1alpha1.GrantTemplateAllowance{{ResourceType: quotav1alpha1.ResourceType(w.rt), Buckets: []quotav1alpha1.GrantTemplateBucket{{Amount: 3}}}}
	must(t, w.admin.Create(ctx, gcp), "creating GrantCreationPolicy")

	for _, p := range w.projects {
		pc := quotatest.NewClient(t, planeConfig(srv.Config, projectPlane(p)))
		consumer := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: p}
		eventually(t, 30*time.Second, "the grant in project "+p+"'s plane", func(ctx context.Context) error {
			g := &quotav1alpha1.ResourceGrant{}
			if err := pc.Get(ctx, client.ObjectKey{Namespace: "milo-system", Name: "default-quota"}, g); err != nil {
				st := &quotav1alpha1.GrantCreationPolicy{}
				_ = w.admin.Get(context.Background(), client.ObjectKeyFromObject(gcp), st)
				var gl quotav1alpha1.ResourceGrantList
				_ = w.admin.List(context.Background(), &gl, client.InNamespace(planes.ProjectNamespace(p)))
				return fmt.Errorf("%v (policy status: %+v, %d grants at the root in %s; synced %+v)", err, st.Status.Conditions, len(gl.Items), planes.ProjectNamespace(p), st.Status.GrantsSynced)
			}
			if g.Spec.ConsumerRef != consumer {
				return fmt.Errorf("the grant in %s's plane is for %+v", p, g.Spec.ConsumerRef)
			}
			return nil
		})
		eventually(t, 30*time.Second, "the bucket in project "+p+"'s plane", func(ctx context.Context) error {
			b, err := bucketIn(ctx, pc, w.rt, consumer)
			if err != nil {
				return err
			}
			if b.Status.Limit != 3 {
				return fmt.Errorf("bucket limit %d, want 3", b.Status.Limit)
			}
			return nil
		})
	}
	// The grants are not written at the root's milo-system.
	rootGrant := &quotav1alpha1.ResourceGrant{}
	if err := w.admin.Get(ctx, client.ObjectKey{Namespace: "milo-system", Name: "default-quota"}, rootGrant); !apierrors.IsNotFound(err) {
		t.Errorf("a parent-context grant was written at the root's milo-system: %v", err)
	}

	a := w.planeKube(w.projects[0])
	for i := 0; i < 3; i++ {
		_, err := a.CoreV1().Secrets("default").Create(ctx, w.secret(fmt.Sprintf("s%d", i)), metav1.CreateOptions{})
		must(t, err, "creating Secret %d of 3 in the plane", i)
	}
	_, err := a.CoreV1().Secrets("default").Create(ctx, w.secret("s3"), metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), quota.RefusalPrefix) || !strings.Contains(err.Error(), w.projects[0]) {
		t.Fatalf("the fourth Secret in a plane with a limit of 3: want a quota refusal naming the project, got %v", err)
	}
	// The other project's plane has its own 3.
	_, err = w.planeKube(w.projects[1]).CoreV1().Secrets("default").Create(ctx, w.secret("s0"), metav1.CreateOptions{})
	must(t, err, "creating a Secret in the other project's plane")
	// The claims live in the plane (its system namespace).
	pc := quotatest.NewClient(t, planeConfig(srv.Config, projectPlane(w.projects[0])))
	eventually(t, 10*time.Second, "three claims in the plane", func(ctx context.Context) error {
		list := &quotav1alpha1.ResourceClaimList{}
		if err := pc.List(ctx, list, client.InNamespace("milo-system")); err != nil {
			return err
		}
		if len(list.Items) != 3 {
			return fmt.Errorf("%d claims", len(list.Items))
		}
		for _, c := range list.Items {
			if c.Annotations[planes.Annotation] != projectPlane(w.projects[0]).String() {
				return fmt.Errorf("claim %s does not name its plane: %v", c.Name, c.Annotations)
			}
		}
		return nil
	})
	must(t, a.CoreV1().Secrets("default").Delete(ctx, "s1", metav1.DeleteOptions{}), "deleting a Secret")
	eventually(t, 30*time.Second, "the deleted Secret's quota released", func(ctx context.Context) error {
		_, err := a.CoreV1().Secrets("default").Create(ctx, w.secret("s3"), metav1.CreateOptions{})
		return err
	})
	// An update in the plane after which the policy no longer applies
	// releases the Secret's quota; one that makes it apply charges again.
	s0, err := a.CoreV1().Secrets("default").Get(ctx, "s0", metav1.GetOptions{})
	must(t, err, "reading s0")
	delete(s0.Labels, "world")
	_, err = a.CoreV1().Secrets("default").Update(ctx, s0, metav1.UpdateOptions{})
	must(t, err, "updating s0 out of the policy")
	eventually(t, 30*time.Second, "s0's quota released by the update", func(ctx context.Context) error {
		_, err := a.CoreV1().Secrets("default").Create(ctx, w.secret("s4"), metav1.CreateOptions{})
		return err
	})
	s0, err = a.CoreV1().Secrets("default").Get(ctx, "s0", metav1.GetOptions{})
	must(t, err, "reading s0")
	s0.Labels = map[string]string{"world": w.id}
	if _, err := a.CoreV1().Secrets("default").Update(ctx, s0, metav1.UpdateOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), quota.RefusalPrefix) {
		t.Errorf("an update bringing a fourth Secret under the policy in a full plane: want a quota refusal, got %v", err)
	}
}

// 4L creates at once, spread over two projects' planes, each project
// granted 4L and their organization L: exactly L are admitted, every round.
func TestOrganizationCapsItsProjectsPlanes(t *testing.T) {
	const limit, rounds = 5, 3
	ctx := context.Background()
	w := newWorld(t, "cap", "ConfigMap", "a", "b")
	w.grant("Organization", w.org, limit)
	for _, p := range w.projects {
		w.grant("Project", p, 4*limit)
	}
	orgBucket := quotatest.NewClient(t, planeConfig(srv.Config, orgPlane(w.org)))
	orgRef := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: w.org}
	for round := 0; round < rounds; round++ {
		var admitted atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, 4*limit)
		for i := 0; i < 4*limit; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				kube := w.planeKube(w.projects[i%2])
				_, err := kube.CoreV1().ConfigMaps("default").Create(ctx, w.configMap(fmt.Sprintf("r%d-%d", round, i)), metav1.CreateOptions{})
				switch {
				case err == nil:
					admitted.Add(1)
				case !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), quota.RefusalPrefix):
					errs <- err
				}
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Errorf("round %d: a create failed for another reason than quota: %v", round, err)
		}
		if got := admitted.Load(); got != limit {
			t.Fatalf("round %d: %d of %d creates admitted under an organization limit of %d", round, got, 4*limit, limit)
		}
		eventually(t, 30*time.Second, "the organization's bucket full", func(ctx context.Context) error {
			b, err := bucketIn(ctx, orgBucket, w.rt, orgRef)
			if err != nil {
				return err
			}
			if b.Status.Allocated != limit {
				return fmt.Errorf("allocated %d, want %d", b.Status.Allocated, limit)
			}
			return nil
		})
		for _, p := range w.projects {
			must(t, w.planeKube(p).CoreV1().ConfigMaps("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "world=" + w.id}), "deleting round %d's ConfigMaps", round)
		}
		eventually(t, 30*time.Second, "the organization's bucket empty", func(ctx context.Context) error {
			b, err := bucketIn(ctx, orgBucket, w.rt, orgRef)
			if err != nil {
				return err
			}
			if b.Status.Allocated != 0 {
				return fmt.Errorf("allocated %d, want 0", b.Status.Allocated)
			}
			return nil
		})
	}
}

// A parent context that cannot be resolved is reported on the policy
// (ParentContextReady False) and by an Event on the trigger, nothing is
// written anywhere, and the grant is written into the parent's plane once
// the parent exists.
func TestUnresolvedParentContext(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, "pcx", "Secret")
	gcp := &quotav1alpha1.GrantCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.id + "-late"}}
	gcp.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	gcp.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace == %q", w.platformNS)}}
	gcp.Spec.Target.ParentContext = &quotav1alpha1.ParentContext{Kind: "Project", NameExpression: "trigger.metadata.labels.parent"}
	gcp.Spec.Target.ResourceGrantTemplate.Metadata.Name = "from-config"
	gcp.Spec.Target.ResourceGrantTemplate.Spec.ConsumerRef = quotav1alpha1.TemplateConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: "{{ trigger.metadata.labels.parent }}"}
	gcp.Spec.Target.ResourceGrantTemplate.Spec.Allowances = []quotav1alpha1.GrantTemplateAllowance{{ResourceType: quotav1alpha1.ResourceType(w.rt), Buckets: []quotav1alpha1.GrantTemplateBucket{{Amount: 2}}}}
	must(t, w.admin.Create(ctx, gcp), "creating GrantCreationPolicy")
	parent := w.id + "-later"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "wants-a-parent", Namespace: w.platformNS, Labels: map[string]string{"parent": parent}}}
	must(t, w.admin.Create(ctx, cm), "creating the trigger")
	eventually(t, 30*time.Second, "ParentContextReady False", func(ctx context.Context) error {
		got := &quotav1alpha1.GrantCreationPolicy{}
		if err := w.admin.Get(ctx, client.ObjectKeyFromObject(gcp), got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, quotav1alpha1.GrantPolicyConditionParentContextReady)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != quotav1alpha1.GrantPolicyReasonParentContextNotFound || !strings.Contains(c.Message, "Project "+parent+" does not exist") {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	eventually(t, 10*time.Second, "a Warning Event on the trigger", func(ctx context.Context) error {
		events := &corev1.EventList{}
		if err := w.admin.List(ctx, events, client.InNamespace(w.platformNS)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == cm.Name && e.Reason == quotav1alpha1.GrantPolicyReasonParentContextNotFound && e.Type == corev1.EventTypeWarning {
				return nil
			}
		}
		return fmt.Errorf("none among %d events", len(events.Items))
	})
	grants := &quotav1alpha1.ResourceGrantList{}
	must(t, w.admin.List(ctx, grants, client.MatchingLabels{quotav1alpha1.GrantPolicyLabel: quotav1alpha1.LabelValue(gcp.Name)}), "listing the policy's grants")
	if len(grants.Items) != 0 {
		t.Fatalf("a grant of an unresolved parent was written: %s/%s", grants.Items[0].Namespace, grants.Items[0].Name)
	}
	pr := &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: parent},
		Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: w.org}}}
	must(t, w.admin.Create(ctx, pr), "creating the parent")
	pc := newPlaneClient(t, projectPlane(parent))
	eventually(t, 30*time.Second, "the grant in the parent's plane", func(ctx context.Context) error {
		return pc.Get(ctx, client.ObjectKey{Namespace: planes.SystemNamespace, Name: "from-config"}, &quotav1alpha1.ResourceGrant{})
	})
	eventually(t, 30*time.Second, "ParentContextReady True", func(ctx context.Context) error {
		got := &quotav1alpha1.GrantCreationPolicy{}
		if err := w.admin.Get(ctx, client.ObjectKeyFromObject(gcp), got); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(got.Status.Conditions, quotav1alpha1.GrantPolicyConditionParentContextReady) {
			return fmt.Errorf("conditions %+v", got.Status.Conditions)
		}
		return nil
	})
}
