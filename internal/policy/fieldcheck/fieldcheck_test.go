package fieldcheck

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDedupeLeavesItsInput: the distinct names, sorted, and the caller's
// list as it was.
func TestDedupeLeavesItsInput(t *testing.T) {
	known := []string{"spec", "metadata", "spec", "apiVersion"}
	before := slices.Clone(known)
	if diff := cmp.Diff([]string{"apiVersion", "metadata", "spec"}, dedupe(known)); diff != "" {
		t.Errorf("dedupe (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, known); diff != "" {
		t.Errorf("the caller's list changed (-before +after):\n%s", diff)
	}
}
