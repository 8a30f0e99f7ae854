package kinds

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// TestKindCache: a kind found served is answered from what was read, until
// maxAge; a kind not found is looked for again at once (a CRD installed a
// moment ago is found), and so is everything after maxAge.
func TestKindCache(t *testing.T) {
	fake := &clienttesting.Fake{Resources: []*metav1.APIResourceList{{GroupVersion: "resourcemanager.miloapis.com/v1alpha1",
		APIResources: []metav1.APIResource{{Name: "organizations", Kind: "Organization"}}}}}
	d := &fakediscovery.FakeDiscovery{Fake: fake}
	now := time.Unix(1000, 0)
	k := NewKindCache(d, 30*time.Second)
	k.now = func() time.Time { return now }
	org := schema.GroupKind{Group: "resourcemanager.miloapis.com", Kind: "Organization"}
	reads := func() int { n := len(fake.Actions()); fake.ClearActions(); return n }

	for i := range 5 {
		if ok, _, err := k.Kind(org); !ok || err != nil {
			t.Fatalf("ask %d: served %v, err %v", i, ok, err)
		}
	}
	first := reads()
	if first == 0 {
		t.Fatal("discovery was never read")
	}
	now = now.Add(10 * time.Second)
	for range 5 {
		_, _, _ = k.Kind(org)
	}
	if n := reads(); n != 0 {
		t.Errorf("a served kind asked again within maxAge read discovery %d times", n)
	}
	// A kind not (yet) served: looked for afresh each time, and found once
	// it is served.
	project := schema.GroupKind{Group: "resourcemanager.miloapis.com", Kind: "Project"}
	if ok, hint, _ := k.Kind(project); ok || hint == "" {
		t.Fatalf("an unserved kind: served %v, hint %q", ok, hint)
	}
	if reads() == 0 {
		t.Error("an unserved kind was answered from what was read before")
	}
	fake.Resources[0].APIResources = append(fake.Resources[0].APIResources, metav1.APIResource{Name: "projects", Kind: "Project"})
	if ok, _, err := k.Kind(project); !ok || err != nil {
		t.Fatalf("a kind served since: served %v, err %v", ok, err)
	}
	reads()
	// After maxAge, even a served kind is read again (it may be gone).
	now = now.Add(31 * time.Second)
	_, _, _ = k.Kind(org)
	if reads() == 0 {
		t.Error("discovery older than maxAge was not read again")
	}
}
