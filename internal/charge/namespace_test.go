package charge

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kubefake "k8s.io/client-go/kubernetes/fake"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// TestANamespaceTheCacheHasNotSeenIsLookedUpLive: a namespace created a
// moment ago (a member's cluster-<name>, made by quotaplane webhook just
// before its first review) is open even though the informer has not seen it
// yet; one that is missing or being deleted is still refused.
func TestANamespaceTheCacheHasNotSeenIsLookedUpLive(t *testing.T) {
	now := metav1.Now()
	live := kubefake.NewClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-east"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cluster-gone", DeletionTimestamp: &now, Finalizers: []string{"kubernetes"}}},
	)
	empty := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	ch := &Charger{kube: live, namespaces: corelisters.NewNamespaceLister(empty), namespacesReady: func() bool { return true }}

	if err := ch.namespaceOpen(t.Context(), "cluster-east"); err != nil {
		t.Errorf("a namespace the API server has and the cache has not seen: %v, want open", err)
	}
	if err := ch.namespaceOpen(t.Context(), "cluster-west"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("a namespace that exists nowhere: %v, want \"does not exist\"", err)
	}
	if err := ch.namespaceOpen(t.Context(), "cluster-gone"); err == nil || !strings.Contains(err.Error(), "being deleted") {
		t.Errorf("a namespace being deleted: %v, want \"is being deleted\"", err)
	}
}
