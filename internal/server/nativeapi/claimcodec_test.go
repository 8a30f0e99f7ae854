package nativeapi

import (
	"bytes"
	"math/rand/v2"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// TestClaimShape: the managed fields remembered by a claim's shape are the
// ones computed for it, over claims that vary every field the engine may
// write (present, empty, absent; values and keys), and the shape knows
// every field of the types it reads.
func TestClaimShape(t *testing.T) {
	for _, tc := range []struct {
		typ    any
		fields int
	}{
		{metav1.ObjectMeta{}, 15}, {quotav1alpha1.ResourceClaimSpec{}, 3}, {quotav1alpha1.ConsumerRef{}, 4},
		{quotav1alpha1.ResourceRef{}, 4}, {quotav1alpha1.ResourceClaimStatus{}, 4},
	} {
		if n := reflect.TypeOf(tc.typ).NumField(); n != tc.fields {
			t.Errorf("%T has %d fields, claimShape knows %d: add the new ones to it", tc.typ, n, tc.fields)
		}
	}
	cc := newClaimCodec(nil, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	pick := func(vals ...string) string { return vals[rng.IntN(len(vals))] }
	strs := func() map[string]string {
		switch rng.IntN(3) {
		case 0:
			return nil
		case 1:
			return map[string]string{}
		}
		m := map[string]string{}
		for range rng.IntN(4) {
			m[pick("a", "b", "quota.miloapis.com/policy", "x/y")] = pick("", "1", "two")
		}
		return m
	}
	maybe := func() bool { return rng.IntN(2) == 0 }
	computed := 0
	for i := range 3000 {
		c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: pick("a", "bb"), Namespace: pick("", "ns"),
			UID: types.UID(pick("", "u1", "u2")), ResourceVersion: pick("", "7"), Generation: int64(rng.IntN(2)),
			Labels: strs(), Annotations: strs()}}
		if maybe() {
			c.CreationTimestamp = metav1.Now()
		}
		if maybe() {
			c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Secret", Name: pick("s", "t"), UID: types.UID(pick("u", "v"))}}
		}
		if maybe() {
			c.Finalizers = []string{pick("f", "g")}
		}
		c.Spec.ConsumerRef = quotav1alpha1.ConsumerRef{APIGroup: pick("", "g"), Kind: pick("", "Organization"), Name: pick("", "acme"), Namespace: pick("", "n")}
		switch rng.IntN(3) {
		case 1:
			c.Spec.Requests = []quotav1alpha1.ResourceRequest{}
		case 2:
			c.Spec.Requests = []quotav1alpha1.ResourceRequest{{ResourceType: "r", Amount: int64(rng.IntN(3))}}
		}
		if maybe() {
			c.Spec.ResourceRef = &quotav1alpha1.ResourceRef{APIGroup: pick("", "apps"), Kind: pick("", "Secret"), Name: pick("", "s"), Namespace: pick("", "ns")}
		}
		c.Status.ObservedGeneration = int64(rng.IntN(2))
		switch rng.IntN(3) {
		case 1:
			c.Status.Conditions = []metav1.Condition{}
		case 2:
			c.Status.Conditions = []metav1.Condition{{Type: "Granted", Status: metav1.ConditionStatus(pick("True", "False")), Reason: pick("", "R")}}
		}
		switch rng.IntN(3) {
		case 1:
			c.Status.Allocations = []quotav1alpha1.RequestAllocation{}
		case 2:
			c.Status.Allocations = []quotav1alpha1.RequestAllocation{{ResourceType: "r", Status: "Granted", AllocatedAmount: int64(rng.IntN(2))}}
		}
		c.Status.DecisionSeal = pick("", "seal")
		got, err := cc.fieldSets(c)
		if err != nil {
			t.Fatal(err)
		}
		want, err := cc.computeFieldSets(c)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[0], want[0]) || !bytes.Equal(got[1], want[1]) {
			shape, _ := claimShape(c)
			t.Fatalf("claim %d (shape %q): remembered\n%s\n%s\ncomputed\n%s\n%s", i, shape, got[0], got[1], want[0], want[1])
		}
		computed = len(cc.sets)
	}
	if computed == 0 || computed > 2000 {
		t.Errorf("%d shapes remembered of 3000 claims: the test does not exercise the memory", computed)
	}
	// Metadata the engine never writes is computed, never remembered.
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{GenerateName: "x-"}}
	if _, ok := claimShape(c); ok {
		t.Error("a claim with generateName has a shape")
	}
}
