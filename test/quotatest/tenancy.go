package quotatest

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
)

// WaitReady waits, at most a minute, until obj (an Organization or a
// Project) is Ready, reading it into obj.
func WaitReady(t testing.TB, c client.Client, obj client.Object) {
	t.Helper()
	var last *metav1.Condition
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
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
		last = meta.FindStatusCondition(conds, rmv1alpha1.ConditionReady)
		return last != nil && last.Status == metav1.ConditionTrue, nil
	})
	if err != nil {
		t.Fatalf("%s never became Ready (last: %+v)", obj.GetName(), last)
	}
}

// Organization creates a standard Organization and waits until it is Ready.
func Organization(t testing.TB, c client.Client, name string) *rmv1alpha1.Organization {
	t.Helper()
	o := &rmv1alpha1.Organization{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: rmv1alpha1.OrganizationSpec{Type: rmv1alpha1.OrganizationTypeStandard}}
	if err := c.Create(context.Background(), o); err != nil {
		t.Fatal(err)
	}
	WaitReady(t, c, o)
	return o
}

// Project creates a Project of organization org and waits until it is
// Ready.
func Project(t testing.TB, c client.Client, name, org string) *rmv1alpha1.Project {
	t.Helper()
	p := &rmv1alpha1.Project{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: rmv1alpha1.ProjectSpec{OwnerRef: rmv1alpha1.OwnerReference{Kind: rmv1alpha1.ProjectOwnerKindOrganization, Name: org}}}
	if err := c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	WaitReady(t, c, p)
	return p
}
