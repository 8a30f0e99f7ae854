package members

import (
	"context"
	"strings"
	"testing"
)

func TestNames(t *testing.T) {
	for _, bad := range []string{"", "Upper", "has.dot", strings.Repeat("a", 60)} {
		if err := ValidateName(bad); err == nil {
			t.Errorf("ValidateName(%q) accepted it", bad)
		}
	}
	if err := ValidateName("eu-west-1"); err != nil {
		t.Errorf("ValidateName(eu-west-1): %v", err)
	}
	if got := ReviewPath("a"); got != "/quota/v1alpha1/clusters/a/review" {
		t.Errorf("ReviewPath(a) = %s", got)
	}
	for path, want := range map[string]string{ReviewPath("eu-1"): "eu-1", "/quota/v1alpha1/clusters/Bad/review": "", "/quota/v1alpha1/clusters/a/b/review": "", "/api": ""} {
		got, ok := ClusterOfPath(path)
		if got != want || ok != (want != "") {
			t.Errorf("ClusterOfPath(%s) = %q, %v; want %q", path, got, ok, want)
		}
	}
	if _, ok := From(context.Background()); ok {
		t.Error("a bare context names a cluster")
	}
	if got, _ := From(WithCluster(context.Background(), "a")); got != "a" {
		t.Errorf("From(WithCluster(a)) = %q", got)
	}
}
