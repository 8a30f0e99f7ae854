package observability

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics/testutil"
	"sigs.k8s.io/yaml"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/manifests"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// scrape reads the server's /metrics.
func scrape(t *testing.T) testutil.Metrics {
	t.Helper()
	kube := kubernetes.NewForConfigOrDie(srv.Config)
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	m := testutil.NewMetrics()
	if err := testutil.ParseMetrics(string(raw), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// labelNames are the sorted label names of a family's series that have
// label key=value.
func labelNames(m testutil.Metrics, family, key, value string) []string {
	for _, s := range m[family] {
		if labelValue(s.Metric, key) != value {
			continue
		}
		var names []string
		for k := range s.Metric {
			if k != "__name__" {
				names = append(names, string(k))
			}
		}
		sort.Strings(names)
		return names
	}
	return nil
}

func labelValue[M ~map[K]V, K, V ~string](m M, key string) string {
	for k, v := range m {
		if string(k) == key {
			return string(v)
		}
	}
	return ""
}

// TestStateMetricsNamesAndLabels: every family the seed names is served, for
// this test's objects, with the seed's labels.
func TestStateMetricsNamesAndLabels(t *testing.T) {
	c := quotatest.NewClient(t, srv.Config)
	f := quotatest.NewFixture(t, c)
	p := f.SecretsPolicy(4)
	f.Claim("c1", quotatest.R("secrets", 1))
	f.Decided("c1")
	bucket := f.WaitBucket(quotatest.N(4, 1, 3), "secrets")
	reg := f.ID + "-secrets"
	gp := &quotav1alpha1.GrantCreationPolicy{}
	if err := yaml.Unmarshal([]byte(manifests.GrantPolicy(f.ID+"-grants")), gp); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), gp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), gp) })

	sorted := func(s ...string) []string { sort.Strings(s); return s }
	bucketLabels := sorted("component", "namespace", "name", "resource_type", "consumer_kind", "consumer_name")
	want := map[string]struct {
		key, value string
		labels     []string
	}{
		"milo_quota_bucket_info":                          {"name", bucket.Name, sorted("component", "uid", "name", "namespace", "consumer_api_group", "consumer_kind", "consumer_name", "resource_type")},
		"milo_quota_bucket_limit":                         {"name", bucket.Name, bucketLabels},
		"milo_quota_bucket_allocated":                     {"name", bucket.Name, bucketLabels},
		"milo_quota_bucket_available":                     {"name", bucket.Name, bucketLabels},
		"milo_quota_bucket_claim_count":                   {"name", bucket.Name, bucketLabels},
		"milo_quota_bucket_grant_count":                   {"name", bucket.Name, bucketLabels},
		"milo_quota_bucket_last_reconciliation_timestamp": {"name", bucket.Name, bucketLabels},
		"milo_quota_bucket_observed_generation":           {"name", bucket.Name, bucketLabels},
		"milo_quota_bucket_current_generation":            {"name", bucket.Name, bucketLabels},
		"milo_quota_registration_info": {"name", reg, sorted("component", "uid", "name", "description", "consumer_api_group", "consumer_kind",
			"resource_type", "registration_type", "base_unit", "display_unit", "unit_conversion_factor")},
		"milo_quota_registration_status_condition":    {"name", reg, sorted("component", "name", "resource_type", "type", "status")},
		"milo_quota_registration_observed_generation": {"name", reg, sorted("component", "name", "resource_type")},
		"milo_quota_registration_current_generation":  {"name", reg, sorted("component", "name", "resource_type")},
		"milo_quota_registration_threshold_percent":   {"name", reg, sorted("component", "name", "resource_type", "level")},
		"milo_quota_grant_info":                       {"namespace", f.NS, sorted("component", "uid", "name", "namespace", "consumer_api_group", "consumer_kind", "consumer_name")},
		"milo_quota_grant_status_condition":           {"namespace", f.NS, sorted("component", "name", "namespace", "type", "status")},
		"milo_quota_grant_observed_generation":        {"namespace", f.NS, sorted("component", "name", "namespace")},
		"milo_quota_grant_current_generation":         {"namespace", f.NS, sorted("component", "name", "namespace")},
		"milo_quota_claim_policy_info":                {"name", p.Name, sorted("component", "uid", "name", "target_api_version", "target_kind", "enabled")},
		"milo_quota_claim_policy_status_condition":    {"name", p.Name, sorted("component", "name", "type", "status")},
		"milo_quota_claim_policy_enabled":             {"name", p.Name, sorted("component", "name")},
		"milo_quota_claim_policy_observed_generation": {"name", p.Name, sorted("component", "name")},
		"milo_quota_claim_policy_current_generation":  {"name", p.Name, sorted("component", "name")},
		"milo_quota_grant_policy_info": {"name", gp.Name, sorted("component", "uid", "name", "trigger_api_version", "trigger_kind",
			"parent_context_api_group", "parent_context_kind", "enabled")},
		"milo_quota_grant_policy_status_condition":    {"name", gp.Name, sorted("component", "name", "type", "status")},
		"milo_quota_grant_policy_enabled":             {"name", gp.Name, sorted("component", "name")},
		"milo_quota_grant_policy_observed_generation": {"name", gp.Name, sorted("component", "name")},
		"milo_quota_grant_policy_current_generation":  {"name", gp.Name, sorted("component", "name")},
	}
	var m testutil.Metrics
	// The bucket's series appear once the bucket writer has verified it.
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		m = scrape(t)
		for family, w := range want {
			if labelNames(m, family, w.key, w.value) == nil {
				return false, nil
			}
		}
		return true, nil
	})
	for family, w := range want {
		got := labelNames(m, family, w.key, w.value)
		if got == nil {
			t.Errorf("no series of %s with %s=%q (%v)", family, w.key, w.value, err)
			continue
		}
		if d := cmp.Diff(w.labels, got); d != "" {
			t.Errorf("labels of %s (-want +got):\n%s", family, d)
		}
	}
	value := func(family string) float64 {
		for _, s := range m[family] {
			if labelValue(s.Metric, "name") == bucket.Name {
				return float64(s.Value)
			}
		}
		return -1
	}
	for family, v := range map[string]float64{"milo_quota_bucket_limit": 4, "milo_quota_bucket_allocated": 1, "milo_quota_bucket_available": 3,
		"milo_quota_bucket_claim_count": 1, "milo_quota_bucket_grant_count": 1} {
		if got := value(family); got != v {
			t.Errorf("%s = %v, want %v", family, got, v)
		}
	}
	if age := time.Since(time.Unix(int64(value("milo_quota_bucket_last_reconciliation_timestamp")), 0)); age > time.Minute+10*time.Second {
		t.Errorf("bucket last verified %s ago", age)
	}
	// Per-claim families are opt-in (--metrics-claim-info).
	if len(m["milo_quota_claim_info"]) > 0 {
		t.Errorf("milo_quota_claim_info is exported without --metrics-claim-info")
	}
	// Admission results, by policy and the trigger's kind (the seed's family).
	if got := labelNames(m, "milo_quota_admission_result_total", "policy_name", p.Name); got != nil {
		if d := cmp.Diff(sorted("result", "policy_name", "policy_namespace", "resource_group", "resource_kind", "mode"), got); d != "" {
			t.Errorf("labels of milo_quota_admission_result_total (-want +got):\n%s", d)
		}
	} else {
		t.Logf("milo_quota_admission_result_total has no series for policy %s (its counting is wired in claimpolicy)", p.Name)
	}
}
