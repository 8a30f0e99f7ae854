package engine

import (
	"math"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestGrantsOfMaxInt64SaturateTheLimit: two grants of MaxInt64 for one
// consumer give its bucket a limit of MaxInt64, not a wrapped negative; a
// claim of 1 is granted and a claim of MaxInt64 on top of it is denied.
func TestGrantsOfMaxInt64SaturateTheLimit(t *testing.T) {
	f := quotatest.NewFixture(t, quotatest.NewClient(t, srv.Config))
	f.Register("projects")
	f.Grant("g1", map[string][]quotatest.Bucket{"projects": {{Amount: math.MaxInt64}}})
	f.Grant("g2", map[string][]quotatest.Bucket{"projects": {{Amount: math.MaxInt64}}})
	f.WaitBucket(quotatest.N(math.MaxInt64, 0, math.MaxInt64), "projects")

	f.Claim("one", quotatest.R("projects", 1))
	if c := f.Decided("one"); c.Status != metav1.ConditionTrue || c.Reason != quotav1alpha1.ClaimReasonQuotaAvailable {
		t.Fatalf("claim of 1: %+v", c)
	}
	f.WaitBucket(quotatest.N(math.MaxInt64, 1, math.MaxInt64-1), "projects")

	f.Claim("all", quotatest.R("projects", math.MaxInt64))
	c := f.Decided("all")
	if c.Status != metav1.ConditionFalse || c.Reason != quotav1alpha1.ClaimReasonQuotaExceeded {
		t.Fatalf("claim of MaxInt64 on top of 1: %+v", c)
	}
	if want := "only 9223372036854775806 of the limit 9223372036854775807 is available (1 allocated"; !strings.Contains(c.Message, want) {
		t.Errorf("denial message %q lacks %q", c.Message, want)
	}
	f.WaitBucket(quotatest.N(math.MaxInt64, 1, math.MaxInt64-1), "projects")
}
