package quota

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestBucketNames: the reference implementation's name for the buckets it
// has, a hash of everything for the others, never a collision between
// them, and legacy names told apart from today's.
func TestBucketNames(t *testing.T) {
	org := ConsumerID{APIGroup: OrganizationGroup, Kind: "Organization", Name: "acme"}
	sum := sha256.Sum256([]byte("resourcemanager.miloapis.com/projects" + "Organization" + "acme"))
	ref := "bucket-" + hex.EncodeToString(sum[:])
	base := BucketID{Consumer: org, ResourceType: "resourcemanager.miloapis.com/projects"}
	if got := BucketName(base); got != ref {
		t.Fatalf("BucketName(%+v) = %s, want the reference's %s", base, got, ref)
	}
	ns := base
	ns.Consumer = ConsumerID{Kind: "Namespace", Name: "acme"}
	others := []BucketID{
		{Consumer: org, ResourceType: base.ResourceType, Dims: "region=dfw"},
		{Consumer: ConsumerID{APIGroup: "example.com", Kind: "Organization", Name: "acme"}, ResourceType: base.ResourceType},
		{Consumer: ConsumerID{APIGroup: OrganizationGroup, Kind: "Organization", Namespace: "x", Name: "acme"}, ResourceType: base.ResourceType},
		ns,
	}
	seen := map[string]bool{ref: true}
	for _, id := range append(others, BucketID{Consumer: ConsumerID{Kind: "Bucket", Name: "a"}, ResourceType: "x/y"}) {
		n := BucketName(id)
		if seen[n] || !IsBucketName(n) {
			t.Errorf("BucketName(%+v) = %s: collides or is not a bucket name", id, n)
		}
		seen[n] = true
		legacy := LegacyBucketName(id)
		if IsBucketName(legacy) {
			t.Errorf("legacy name %s reads as today's", legacy)
		}
		if l := LegacyBucketLabelValue(id); len(l) > 63 || (len(legacy) <= 63 && l != legacy) {
			t.Errorf("label value %q of legacy name %q", l, legacy)
		}
	}
	long := BucketID{Consumer: ConsumerID{Kind: "Project", Name: strings.Repeat("p", 120)}, ResourceType: "example.com/things"}
	if l := LegacyBucketLabelValue(long); len(l) > 63 || !strings.HasSuffix(l, LegacyBucketName(long)[len(LegacyBucketName(long))-10:]) {
		t.Errorf("a long legacy name's label value %q is not its prefix and hash", l)
	}
	for _, n := range []string{"bucket-", "bucket-xyz", "organization-acme-projects-501bd6d931", "bucket-" + strings.Repeat("g", 64)} {
		if IsBucketName(n) {
			t.Errorf("IsBucketName(%q)", n)
		}
	}
}
