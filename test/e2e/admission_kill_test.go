package e2e

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestAdmissionSurvivesKill: quotaplane serve is SIGKILLed while 16 clients
// create Secrets under a ClaimCreationPolicy (limit 50), then started again
// on the same data directory. Grants recorded before the kill whose Secrets
// were stored must become claims owned by them; grants whose Secrets never
// got stored must be released. Then filling the quota admits exactly up to
// 50 stored Secrets in all: a lost grant would admit a 51st, a leaked one
// would stop short.
func TestAdmissionSurvivesKill(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const limit = 50
	k := serveForKill(t)
	p, c := k.proc, k.c
	f := quotatest.NewFixture(t, c)
	f.SecretsPolicy(limit)

	// 16 clients create Secrets; the server is killed after the 20th success.
	next := make(chan int, 200)
	for i := range 200 {
		next <- i
	}
	close(next)
	admitted := killAfterSuccesses(t, p, 16, 200, 20, func(*rand.Rand) error {
		i, more := <-next
		if !more {
			return errors.New("no more Secrets to create")
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%03d", i), Namespace: f.NS}})
	})
	t.Logf("killed after %d admitted creates", admitted)

	began := time.Now()
	k.restart(t)
	ctx := context.Background()
	var stored int
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		secrets := &corev1.SecretList{}
		claims := &quotav1alpha1.ResourceClaimList{}
		bucket := &quotav1alpha1.AllowanceBucket{}
		if c.List(ctx, secrets, client.InNamespace(f.NS)) != nil || c.List(ctx, claims, client.InNamespace(f.NS)) != nil ||
			c.Get(ctx, client.ObjectKey{Namespace: f.BucketNS, Name: f.BucketName("secrets")}, bucket) != nil {
			return false, nil
		}
		stored = len(secrets.Items)
		owned := map[string]bool{}
		for _, cl := range claims.Items {
			if meta.IsStatusConditionTrue(cl.Status.Conditions, quotav1alpha1.ClaimConditionGranted) && len(cl.OwnerReferences) == 1 {
				owned[string(cl.OwnerReferences[0].UID)] = true
			}
		}
		for _, s := range secrets.Items {
			if !owned[string(s.UID)] {
				return false, nil
			}
		}
		return len(claims.Items) == stored && bucket.Status.Allocated == int64(stored), nil
	})
	if err != nil {
		t.Fatalf("after the restart, the stored Secrets never all had their granted claims with the bucket allocating exactly them (%d stored)", stored)
	}
	t.Logf("%d Secrets stored before the kill (%d answered); all claimed and accounted %s after the restart began", stored, admitted, time.Since(began).Round(time.Millisecond))
	if stored < int(admitted) {
		t.Fatalf("%d creates were answered as admitted but only %d Secrets are stored", admitted, stored)
	}

	// Fill the quota: exactly limit Secrets in all.
	for i := 0; ; i++ {
		err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("after-%03d", i), Namespace: f.NS}})
		if err == nil {
			stored++
			if stored > limit {
				t.Fatalf("%d Secrets admitted against a limit of %d", stored, limit)
			}
			continue
		}
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "Insufficient quota resources available") {
			t.Fatalf("create %d after the restart: %v; want success or a quota denial", i, err)
		}
		break
	}
	if stored != limit {
		t.Fatalf("the quota filled at %d Secrets; want exactly %d (a grant leaked across the kill)", stored, limit)
	}
}
