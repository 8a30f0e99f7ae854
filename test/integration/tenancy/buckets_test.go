package tenancy

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestBucketWaitsForItsOrganizationsNamespace: the engine does not create an
// organization's namespace for its bucket; the bucket is written once the
// organization (and so its namespace) exists.
func TestBucketWaitsForItsOrganizationsNamespace(t *testing.T) {
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, admin)
	f.Register("units")
	name := uniq("late")
	consumer := quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Organization", Name: name}
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "units-" + name, Namespace: f.NS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: consumer,
		Allowances:  []quotav1alpha1.Allowance{{ResourceType: f.RT("units"), Buckets: []quotav1alpha1.GrantBucket{{Amount: 7}}}}}}
	if err := admin.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	f.WaitCondition(g, quotav1alpha1.GrantConditionActive, metav1.ConditionTrue)

	// Long enough for several retries of the bucket's write.
	time.Sleep(2 * time.Second)
	ns := &corev1.Namespace{}
	if err := admin.Get(ctx, client.ObjectKeyFromObject(namespaceOf(name)), ns); !apierrors.IsNotFound(err) {
		t.Fatalf("namespace %s exists before its organization (get: %v); only the organization may create it", ns.Name, err)
	}

	org := newOrganization(name)
	if err := admin.Create(ctx, org); err != nil {
		t.Fatal(err)
	}
	bucketName := quota.BucketName(quota.BucketID{Consumer: quota.ConsumerID{APIGroup: consumer.APIGroup, Kind: consumer.Kind, Name: name}, ResourceType: string(f.RT("units"))})
	b := &quotav1alpha1.AllowanceBucket{}
	began := time.Now()
	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		err := admin.Get(ctx, client.ObjectKey{Namespace: rmv1alpha1.OrganizationNamespace(name), Name: bucketName}, b)
		return err == nil && b.Status.Limit == 7, nil
	})
	if err != nil {
		t.Fatalf("bucket %s/%s never showed limit 7 after the organization was created (limit %d)", rmv1alpha1.OrganizationNamespace(name), bucketName, b.Status.Limit)
	}
	t.Logf("bucket written %s after its organization was created", time.Since(began).Round(time.Millisecond))
	if err := admin.Get(ctx, client.ObjectKeyFromObject(namespaceOf(name)), ns); err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(ns); ref == nil || ref.UID != org.UID {
		t.Errorf("namespace %s controller %+v, want the organization", ns.Name, ref)
	}
}
