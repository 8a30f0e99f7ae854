package fence

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

func sealedClaim(uid string, amount int64) *quotav1alpha1.ResourceClaim {
	c := &quotav1alpha1.ResourceClaim{}
	c.UID = types.UID("uid-" + uid)
	c.Spec.ConsumerRef = quotav1alpha1.ConsumerRef{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "p-" + uid}
	c.Spec.Requests = []quotav1alpha1.ResourceRequest{
		{ResourceType: "compute.example.com/cpu", Amount: amount, Dimensions: []quotav1alpha1.Dimension{{Key: "zone", Value: "b"}, {Key: "arch", Value: "arm"}}},
		{ResourceType: "compute.example.com/instances", Amount: 1},
	}
	return c
}

// TestSealsAreThoseStoredBefore: seals already stored stay valid, so the
// input hashed is exactly the one seals were first made from, byte for byte.
func TestSealsAreThoseStoredBefore(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	s := NewSealer(key)
	c := sealedClaim("a", 1500)
	m := hmac.New(sha256.New, key)
	m.Write([]byte("uid-a\nProject.resourcemanager.miloapis.com p-a" +
		"\ncompute.example.com/cpu 1500 arch=arm,zone=b\ncompute.example.com/instances 1 \nGranted"))
	want := base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	if got := s.Seal(c); got != want {
		t.Fatalf("Seal = %s, want %s (the sealed input changed: every stored seal would be distrusted)", got, want)
	}
	c.Status.DecisionSeal = want
	if !s.Trusted(c) {
		t.Fatal("a claim carrying its own seal is not trusted")
	}
	for _, bad := range []string{"", want[:len(want)-1], want + "A", want + want, "!" + want[1:], s.Seal(sealedClaim("a", 1501))} {
		c.Status.DecisionSeal = bad
		if s.Trusted(c) {
			t.Errorf("seal %q trusted for another claim's decision", bad)
		}
	}
	c.Status.DecisionSeal = want
	c.Spec.Requests[0].Amount = 1501
	if s.Trusted(c) {
		t.Error("a claim whose amount was raised after it was sealed is trusted")
	}
}

// TestSealsAreCheckedConcurrently: the pooled hashes are not shared.
func TestSealsAreCheckedConcurrently(t *testing.T) {
	s := NewSealer([]byte("0123456789abcdef0123456789abcdef"))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				c := sealedClaim(string(rune('a'+g)), int64(i))
				c.Status.DecisionSeal = s.Seal(c)
				if !s.Trusted(c) {
					t.Errorf("claim %d of goroutine %d: its own seal is not trusted", i, g)
					return
				}
			}
		})
	}
	wg.Wait()
}
