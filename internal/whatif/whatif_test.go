package whatif

import (
	"bytes"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// The registrations of examples/workloads: cpu in millicores read in cores,
// memory in bytes read in MiB, pods counted.
var workloadUnits = Units{
	"core/pods":            {ResourceType: "core/pods", BaseUnit: "pod"},
	"core/requests.cpu":    {ResourceType: "core/requests.cpu", BaseUnit: "millicore", DisplayUnit: "core", UnitConversionFactor: 1000},
	"core/requests.memory": {ResourceType: "core/requests.memory", BaseUnit: "byte", DisplayUnit: "MiB", UnitConversionFactor: 1048576},
}

var teamA = quotav1alpha1.ConsumerRef{Kind: "Namespace", Name: "team-a"}

func workloadReview() *quotav1alpha1.QuotaReview {
	r := &quotav1alpha1.QuotaReview{}
	r.Status.Objects = []quotav1alpha1.QuotaReviewObject{
		{Index: 0, Kind: "Pod", Namespace: "team-a", Name: "batch", Operation: "Create", Result: quotav1alpha1.ReviewRefused, Reason: quotav1alpha1.ReviewReasonQuotaExceeded,
			Charges: []quotav1alpha1.QuotaReviewCharge{
				{ConsumerRef: teamA, ResourceType: "core/pods", Amount: 1},
				{ConsumerRef: teamA, ResourceType: "core/requests.cpu", Amount: 600},
				{ConsumerRef: teamA, ResourceType: "core/requests.memory", Amount: 64 << 20},
			}},
		{Index: 1, Kind: "Gadget", Namespace: "team-a", Name: "g", Operation: "Update", Result: quotav1alpha1.ReviewFits,
			Charges: []quotav1alpha1.QuotaReviewCharge{{ConsumerRef: teamA, ResourceType: "core/requests.cpu", Held: 1000, Amount: 2000}}},
	}
	r.Status.Buckets = []quotav1alpha1.QuotaReviewBucket{
		{ConsumerRef: teamA, ResourceType: "core/requests.cpu", Limit: 3000, Allocated: 1500, Take: 1000, AllocatedAfter: 2500, Refused: 600},
		{ConsumerRef: teamA, ResourceType: "core/requests.memory", Limit: 1 << 30, Allocated: 256 << 20, Take: -(128 << 20), AllocatedAfter: 128 << 20},
		{ConsumerRef: teamA, ResourceType: "core/pods", Unlimited: true, Allocated: 1, Take: 0, AllocatedAfter: 1},
	}
	return r
}

// row finds the table's line that starts with first and returns its cells
// (columns are two or more spaces apart).
func row(t *testing.T, table, first string) []string {
	t.Helper()
	for _, l := range strings.Split(table, "\n") {
		if strings.HasPrefix(l, first) {
			return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(l), -1)
		}
	}
	t.Fatalf("no row starts with %q:\n%s", first, table)
	return nil
}

// TestAmountsAreWrittenAsRefusalsWriteThem: every amount what-if prints —
// charges, what an update holds, a bucket's limit, allocated, take, after
// and refused, a policy preview's limit, allocated, after and over — is
// written as the refusal of the same request writes it.
func TestAmountsAreWrittenAsRefusalsWriteThem(t *testing.T) {
	var out bytes.Buffer
	if err := PrintTable(&out, workloadReview(), []Source{{File: "pods.yaml", Document: 1}, {File: "g.yaml", Document: 1}}, workloadUnits); err != nil {
		t.Fatal(err)
	}
	table := out.String()

	// The refusal of the Pod's cpu, as admission words it.
	reg := workloadUnits["core/requests.cpu"]
	claim := quota.Claim{Consumer: quota.ConsumerID{Kind: "Namespace", Name: "team-a"}, Requests: []quota.Request{{ResourceType: reg.ResourceType, Amount: 600}}}
	refused := quota.ExceededMessage(claim, claim.Requests[0], reg, quota.BucketID{Consumer: claim.Consumer, ResourceType: reg.ResourceType}, 1000, 500)
	asked := regexp.MustCompile(`^requested (.+) of core/requests\.cpu`).FindStringSubmatch(refused)
	if asked == nil || asked[1] != "600 millicores" {
		t.Fatalf("the refusal %q does not say the amount as expected", refused)
	}

	for _, tc := range []struct {
		first string
		want  []string
	}{
		{"0 ", []string{"0", "pods.yaml#1", "Pod", "team-a", "batch", "Create", "Refused",
			"1 pod of core/pods for Namespace/team-a, " + asked[1] + " of core/requests.cpu for Namespace/team-a, 67108864 bytes (64 MiB) of core/requests.memory for Namespace/team-a",
			"QuotaExceeded"}},
		{"1 ", []string{"1", "g.yaml#1", "Gadget", "team-a", "g", "Update", "Fits",
			"1000 millicores (1 core) → 2000 millicores (2 cores) of core/requests.cpu for Namespace/team-a", "-"}},
		{"Namespace/team-a  core/requests.cpu", []string{"Namespace/team-a", "core/requests.cpu",
			"3000 millicores (3 cores)", "1500 millicores", "+1000 millicores (1 core)", "2500 millicores", "600 millicores"}},
		{"Namespace/team-a  core/requests.memory", []string{"Namespace/team-a", "core/requests.memory",
			"1073741824 bytes (1024 MiB)", "268435456 bytes (256 MiB)", "-134217728 bytes (-128 MiB)", "134217728 bytes (128 MiB)", "-"}},
		{"Namespace/team-a  core/pods", []string{"Namespace/team-a", "core/pods", "none", "1 pod", "0 pods", "1 pod", "-"}},
	} {
		if diff := cmp.Diff(tc.want, row(t, table, tc.first)); diff != "" {
			t.Errorf("row %q (-want +got):\n%s\n%s", tc.first, diff, table)
		}
	}

	// A preview's consumers are written the same way.
	r := &quotav1alpha1.QuotaReview{}
	r.Status.PolicyImpact = &quotav1alpha1.PolicyPreviewResult{Consumers: []quotav1alpha1.ConsumerImpact{
		{ConsumerRef: teamA, ResourceType: "core/requests.memory", Limit: 1 << 30, Allocated: 512 << 20, AllocatedAfter: 1536 << 20, Objects: 4, WouldRefuse: 1},
	}}
	out.Reset()
	if err := PrintPolicyTable(&out, r, workloadUnits); err != nil {
		t.Fatal(err)
	}
	want := []string{"Namespace/team-a", "core/requests.memory", "1073741824 bytes (1024 MiB)", "536870912 bytes (512 MiB)", "1610612736 bytes (1536 MiB)", "4", "1", "+536870912 bytes (512 MiB)"}
	if diff := cmp.Diff(want, row(t, out.String(), "Namespace/team-a")); diff != "" {
		t.Errorf("preview row (-want +got):\n%s\n%s", diff, out.String())
	}
}

// TestWithoutUnitsAmountsAreBaseUnits: a user who may not read the
// registrations sees the numbers the answer holds.
func TestWithoutUnitsAmountsAreBaseUnits(t *testing.T) {
	var out bytes.Buffer
	if err := PrintTable(&out, workloadReview(), nil, nil); err != nil {
		t.Fatal(err)
	}
	want := []string{"Namespace/team-a", "core/requests.cpu", "3000", "1500", "+1000", "2500", "600"}
	if diff := cmp.Diff(want, row(t, out.String(), "Namespace/team-a  core/requests.cpu")); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !strings.Contains(out.String(), "1000 → 2000 of core/requests.cpu for Namespace/team-a") {
		t.Errorf("an update's charge without units:\n%s", out.String())
	}
}
