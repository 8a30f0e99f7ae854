package planes

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestNamespaceConsumerIsNotSharedAcrossPlanes (issue 33, hole 7): a
// policy charging Namespace consumers (examples/workloads style: the
// consumer is the trigger's namespace) and a grant of 2 for the root's
// Namespace default. A service of the project (a real service-account token
// bound to the shipped quotaplane-project-member and quotaplane-owning-service
// roles) creating ConfigMaps in its plane's own default namespace is
// refused, naming the policy, the consumer and what to do, and the root's
// bucket stays at 0; a ResourceClaim created in the plane naming Namespace
// default is refused likewise. The root's own default then uses its whole
// limit.
func TestNamespaceConsumerIsNotSharedAcrossPlanes(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, admin)
	id := "nsc-" + f.ID
	rt := id + ".example.com/configmaps"
	o := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	must(t, admin.Create(ctx, o), "creating organization %s", id)
	waitReady(t, admin, o)
	project := &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: id + "-web"},
		Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: id}}}
	must(t, admin.Create(ctx, project), "creating project %s", project.Name)
	waitReady(t, admin, project)

	nsConsumer := quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "default"}
	reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: id}, Spec: quotav1alpha1.ResourceRegistrationSpec{
		ConsumerType: quotav1alpha1.ConsumerTypeRef{Kind: "Namespace"}, Type: quotav1alpha1.RegistrationTypeAllocation,
		ResourceType: quotav1alpha1.ResourceType(rt), BaseUnit: "object", ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}}}}
	must(t, admin.Create(ctx, reg), "registering %s", rt)
	f.WaitCondition(reg, quotav1alpha1.RegistrationConditionActive, metav1.ConditionTrue)
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: id, Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: nsConsumer, Allowances: []quotav1alpha1.Allowance{{ResourceType: quotav1alpha1.ResourceType(rt), Buckets: []quotav1alpha1.GrantBucket{{Amount: 2}}}}}}
	must(t, admin.Create(ctx, g), "granting 2 to Namespace default")
	f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)
	ccp := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: id}}
	ccp.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	ccp.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.?labels.world.orValue('') == %q", id)}}
	ccp.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{Kind: "Namespace", Name: "{{ trigger.metadata.namespace }}"},
		Requests:    []quotav1alpha1.ClaimTemplateRequest{{ResourceType: rt, Amount: intstr.FromInt32(1)}}}
	must(t, admin.Create(ctx, ccp), "creating ClaimCreationPolicy %s", id)
	t.Cleanup(func() { _ = admin.Delete(context.Background(), ccp) })
	f.WaitCondition(ccp, quotav1alpha1.PolicyConditionReady, metav1.ConditionTrue)
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"world": id}}}
	}
	// In force: a dry run at the root says it would charge Namespace default.
	f.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("configmaps"), cm(id+"-probe"), ccp.Name, ccp.Generation)
	wantBucket(t, admin, rt, nsConsumer, 2, 0)

	// A service that creates objects for tenants (the shipped
	// quotaplane-owning-service: it may charge any consumer) and is a member
	// of the project (quotaplane-project-member): real tokens, shipped roles.
	quotatest.ServiceAccountToken(t, srv.Config, f.NS, "member", "quotaplane-project-member", planes.ProjectNamespace(project.Name))
	token, _ := quotatest.ServiceAccountToken(t, srv.Config, f.NS, "member", "quotaplane-owning-service", "")
	memberCfg := rest.AnonymousClientConfig(planeConfig(srv.Config, projectPlane(project.Name)))
	memberCfg.BearerToken = token
	member := kubernetes.NewForConfigOrDie(memberCfg)
	eventually(t, 10*time.Second, "the project member enters its plane", func(ctx context.Context) error {
		_, err := member.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
		return err
	})
	for i := range 3 {
		_, err := member.CoreV1().ConfigMaps("default").Create(ctx, cm(fmt.Sprintf("%s-plane-%d", id, i)), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) {
			t.Fatalf("ConfigMap %d in the plane's default, charged to Namespace default: got %v, want 403", i, err)
		}
		for _, want := range []string{"ClaimCreationPolicy " + id, "Namespace default", "control plane of Project " + project.Name, "not the root's", "charge the plane's owner"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the refusal does not say %q: %v", want, err)
			}
		}
	}
	// A claim made by hand in the plane naming the root's namespace.
	claim := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: id + "-by-hand", Namespace: planes.SystemNamespace},
		Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: nsConsumer, Requests: []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(rt), Amount: 1}}}}
	memberClient := quotatest.NewClient(t, memberCfg)
	if err := memberClient.Create(ctx, claim); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "Namespace default") {
		t.Fatalf("a ResourceClaim in the plane naming Namespace default: got %v, want 403 naming the consumer", err)
	}
	time.Sleep(time.Second) // a bucket is rewritten within 100 ms of a change
	wantBucket(t, admin, rt, nsConsumer, 2, 0)

	// The root's default uses its whole limit.
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	for i := range 2 {
		if _, err := kube.CoreV1().ConfigMaps("default").Create(ctx, cm(fmt.Sprintf("%s-root-%d", id, i)), metav1.CreateOptions{}); err != nil {
			t.Fatalf("ConfigMap %d in the root's default, within its limit of 2: %v", i, err)
		}
		t.Cleanup(func() {
			_ = kube.CoreV1().ConfigMaps("default").Delete(context.Background(), fmt.Sprintf("%s-root-%d", id, i), metav1.DeleteOptions{})
		})
	}
	if _, err := kube.CoreV1().ConfigMaps("default").Create(ctx, cm(id+"-root-2"), metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a third ConfigMap in the root's default: got %v, want refused for quota", err)
	}
	wantBucket(t, admin, rt, nsConsumer, 2, 2)
}

// wantBucket waits until consumer's bucket of rt (kept in the system
// namespace: a Namespace is cluster scoped) shows limit and allocated.
func wantBucket(t *testing.T, admin client.Client, rt string, consumer quotav1alpha1.ConsumerRef, limit, allocated int64) {
	t.Helper()
	name := quota.BucketName(quota.BucketID{Consumer: quota.ConsumerID{APIGroup: consumer.APIGroup, Kind: consumer.Kind, Name: consumer.Name}, ResourceType: rt})
	eventually(t, 15*time.Second, fmt.Sprintf("bucket of %s for %s %s at %d/%d", rt, consumer.Kind, consumer.Name, allocated, limit), func(ctx context.Context) error {
		b := &quotav1alpha1.AllowanceBucket{}
		if err := admin.Get(ctx, client.ObjectKey{Namespace: engine.DefaultOptions().SystemNamespace, Name: name}, b); err != nil {
			return err
		}
		if b.Status.Limit != limit || b.Status.Allocated != allocated {
			return fmt.Errorf("limit %d, allocated %d", b.Status.Limit, b.Status.Allocated)
		}
		return nil
	})
}
