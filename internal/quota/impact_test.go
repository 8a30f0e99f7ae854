package quota

import (
	"testing"
	"time"
)

func TestImpactTakesObjectsInCreationOrder(t *testing.T) {
	org := func(n string) BucketID {
		return BucketID{Consumer: ConsumerID{APIGroup: OrganizationGroup, Kind: "Organization", Name: n}, ResourceType: "cpus"}
	}
	t0 := time.Unix(1000, 0)
	objs := []ImpactObject{
		// Listed out of order: the earliest object gets the room first.
		{Name: "late", Created: t0.Add(3 * time.Second), Charges: []ImpactCharge{{org("a"), 2}}},
		{Name: "first", Created: t0, Charges: []ImpactCharge{{org("a"), 4}}},
		{Name: "second", Created: t0.Add(time.Second), Charges: []ImpactCharge{{org("a"), 3}}},
		{Name: "small", Created: t0.Add(2 * time.Second), Charges: []ImpactCharge{{org("a"), 1}}},
		{Name: "nogrant", Created: t0, Charges: []ImpactCharge{{org("b"), 1}}},
		// Two buckets at once: refused as a whole when one does not fit.
		{Name: "both", Created: t0.Add(4 * time.Second), Charges: []ImpactCharge{{org("c"), 1}, {org("a"), 1}}},
	}
	now := func(id BucketID) BucketNow {
		switch id.Consumer.Name {
		case "a":
			return BucketNow{Limit: 6, Allocated: 1}
		case "c":
			return BucketNow{Limit: 10}
		}
		return BucketNow{}
	}
	res := Impact(objs, now, 2)
	// a: 1 allocated; first (4) fits → 5; second (3) refused; small (1) fits → 6;
	// late (2) refused; both refused (a is full), so c takes nothing that fits.
	if res.Fits != 2 || res.Refused != 4 {
		t.Fatalf("fits %d refused %d, want 2 and 4", res.Fits, res.Refused)
	}
	if len(res.RefusedObjects) != 2 || res.RefusedObjects[0] != "nogrant" || res.RefusedObjects[1] != "second" {
		t.Errorf("refused objects %v, want the first two in creation order", res.RefusedObjects)
	}
	got := map[string]BucketImpact{}
	for _, b := range res.Buckets {
		got[b.Bucket.Consumer.Name] = b
	}
	if a := got["a"]; a.AllocatedAfter != 1+4+3+1+2+1 || a.Objects != 5 || a.WouldRefuse != 3 || a.Over() != 6 {
		t.Errorf("bucket a %+v", a)
	}
	if c := got["c"]; c.AllocatedAfter != 1 || c.WouldRefuse != 1 || c.Over() != 0 {
		t.Errorf("bucket c %+v", c)
	}
	over, total := res.OverLimit(1)
	if total != 2 || len(over) != 1 || over[0].Bucket.Consumer.Name != "a" {
		t.Errorf("over %v of %d, want a first of 2", over, total)
	}
}
