package tenancy

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestOrganizationBurstAndDeletion: organizations created at once all become
// Ready, and deleted at once all go, with their namespaces.
func TestOrganizationBurstAndDeletion(t *testing.T) {
	if testing.Short() {
		t.Skip("creates and deletes 200 organizations")
	}
	quotatest.Exclusive(t)
	const n = 200
	ctx := context.Background()
	admin := quotatest.NewClient(t, srv.Config)
	label := uniq("burst")
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", label, i)
	}
	forEach := func(do func(string) error) {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		sem := make(chan struct{}, 32)
		for _, name := range names {
			wg.Add(1)
			sem <- struct{}{}
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				errs <- do(name)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(ready bool) int {
		l := &rmv1alpha1.OrganizationList{}
		if err := admin.List(ctx, l, client.MatchingLabels{"burst": label}); err != nil {
			return -1
		}
		if !ready {
			return len(l.Items)
		}
		r := 0
		for _, o := range l.Items {
			if meta.IsStatusConditionTrue(o.Status.Conditions, rmv1alpha1.ConditionReady) {
				r++
			}
		}
		return r
	}

	began := time.Now()
	forEach(func(name string) error {
		o := newOrganization(name)
		o.Labels = map[string]string{"burst": label}
		return admin.Create(ctx, o)
	})
	created := time.Since(began)
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return count(true) == n, nil
	}); err != nil {
		t.Fatalf("%d of %d organizations Ready after 2 minutes", count(true), n)
	}
	t.Logf("%d organizations: created in %s, all Ready (namespace and owner bindings) after %s", n, created.Round(time.Millisecond), time.Since(began).Round(time.Millisecond))

	began = time.Now()
	if err := admin.DeleteAllOf(ctx, &rmv1alpha1.Organization{}, client.MatchingLabels{"burst": label}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
		return count(false) == 0, nil
	}); err != nil {
		t.Fatalf("%d of %d organizations still there 5 minutes after they were deleted", count(false), n)
	}
	for _, name := range names {
		if err := admin.Get(ctx, client.ObjectKeyFromObject(namespaceOf(name)), namespaceOf(name)); err == nil {
			t.Errorf("namespace of deleted organization %s remains", name)
		}
	}
	t.Logf("%d organizations deleted, with their namespaces, in %s", n, time.Since(began).Round(time.Millisecond))
}
