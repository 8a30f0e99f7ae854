package server_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"

	"github.com/quotaplane/quotaplane/internal/server"
)

// TestATokenAuthenticatesBeforeTheCacheSeesItsAccount: the token getter
// reads the server when its caches have not seen a service account yet, so a
// token issued a moment after its account was created authenticates (CI saw
// 401 for such a token under load). The getter here is given informers that
// never start: every answer comes from the live read, and a missing account
// is still missing.
func TestATokenAuthenticatesBeforeTheCacheSeesItsAccount(t *testing.T) {
	client := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sa, err := client.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secret, err := client.CoreV1().Secrets("default").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	getter := server.TokenGetter(informers.NewSharedInformerFactory(client, 0), client)
	got, err := getter.GetServiceAccount(ctx, "default", "fresh")
	if err != nil || got.UID != sa.UID {
		t.Fatalf("a service account the cache has not seen: %v, %v; want the account %s", got, err, sa.UID)
	}
	if s, err := getter.GetSecret(ctx, "default", "fresh"); err != nil || s.UID != secret.UID {
		t.Fatalf("a secret the cache has not seen: %v, %v; want the secret %s", s, err, secret.UID)
	}
	if _, err := getter.GetServiceAccount(ctx, "default", "gone"); !apierrors.IsNotFound(err) {
		t.Fatalf("a service account that does not exist: %v, want NotFound", err)
	}
	if _, err := getter.GetPod(ctx, "default", "p"); !apierrors.IsNotFound(err) {
		t.Fatalf("a pod, on a plane that runs none: %v, want NotFound", err)
	}
}
