package accounting

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// Buckets show what each member cluster's objects hold, a refusal says
// where the usage is, and a released claim leaves its cluster's share.
func TestUsagePerCluster(t *testing.T) {
	e := New()
	e.UpsertRegistration(reg("p", "x.io/p"))
	e.UpsertGrant(grant("g", org, "x.io/p", quota.GrantBucket{Amount: 6}))
	req := quota.Request{ResourceType: "x.io/p", Amount: 2}
	for i, cluster := range []string{"east", "east", "", "west"} {
		c := claim(string(rune('a'+i)), i, org, req)
		c.Cluster = cluster
		if cluster == "" {
			c.Requests = []quota.Request{{ResourceType: "x.io/p", Amount: 1}} // the quota plane's own object
		}
		e.AddClaim(c)
	}
	e.Decide()
	b, _ := e.Bucket(quota.BucketID{Consumer: org, ResourceType: "x.io/p"})
	if diff := cmp.Diff(map[string]int64{"east": 4}, b.Clusters); diff != "" {
		// west's claim did not fit: 4 + 1 of 6, and west asked for 2.
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	d, _ := e.Decision("d")
	if d.Outcome == quota.Granted || !strings.Contains(d.Message, "; in use: 4 in cluster east, 1 in the quota plane") {
		t.Errorf("west's refusal does not say where the usage is: %s %q", d.Outcome, d.Message)
	}
	e.RemoveClaim("a")
	e.Decide()
	b, _ = e.Bucket(quota.BucketID{Consumer: org, ResourceType: "x.io/p"})
	if diff := cmp.Diff(map[string]int64{"east": 2, "west": 2}, b.Clusters); diff != "" {
		t.Errorf("after east released one, clusters (-want +got):\n%s", diff)
	}
	if b.Allocated != 5 {
		t.Errorf("allocated %d, want 5", b.Allocated)
	}
	if got := (&quota.BucketStatus{Allocated: 3}).WhereText(); got != "" {
		t.Errorf("a bucket with no member usage says %q", got)
	}
}
