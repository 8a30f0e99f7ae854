package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotaplane/quotaplane/test/promtest"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/tools"
)

// shortFor shortens the rules' `for:` durations, and nothing else.
var forLine = regexp.MustCompile(`(?m)^(\s+for:\s*)\S+\s*$`)

// TestPrometheusScrapesServe runs a real Prometheus (Debian's package)
// scraping two serve replicas on one etcd, with the shipped rule file (only
// its `for:` durations shortened). A bucket driven past 90 % fires the
// shipped QuotaBucketWarning alert through Prometheus's API; only the
// leading replica's bucket series are scraped; and every query of the
// shipped dashboard parses and returns data.
func TestPrometheusScrapesServe(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two replicas and Prometheus")
	}
	prometheus := tools.Require(t, tools.Prometheus)
	bin := quotatest.BuildBinary(t)
	// Not quotatest.Exclusive: nothing here is timed but the alert's 2-minute
	// wait (rules evaluated and targets scraped every second), and holding
	// every other heavy test back for it cost the suite its length.
	ctx := t.Context()

	etcdURL := quotatest.StartEtcd(t)
	replicas := []*quotatest.Replica{quotatest.StartReplica(t, bin, "a", etcdURL), quotatest.StartReplica(t, bin, "b", etcdURL)}
	var leader, standby *quotatest.Replica
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := replicas[0].Client.CoordinationV1().Leases("quotaplane-system").Get(ctx, "quotaplane-quota-engine", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		for i, r := range replicas {
			if r.Identity == *l.Spec.HolderIdentity {
				leader, standby = r, replicas[1-i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no replica leads the engine: %v", err)
	}
	t.Logf("replica %s leads, %s stands by", leader.Name, standby.Name)

	dir := t.TempDir()
	rules, err := os.ReadFile(filepath.Join(monitoringDir(), "quotaplane-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rulesFile := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesFile, forLine.ReplaceAll(rules, []byte("${1}1s")), 0o600); err != nil {
		t.Fatal(err)
	}
	var targets []promtest.Target
	for _, r := range replicas {
		targets = append(targets, promtest.Target{Name: r.Name, Config: r.Config})
	}
	prom := promtest.Start(t, prometheus, dir, time.Second, rulesFile, targets...)
	prom.WaitTargetsUp(t, len(replicas))

	// Quota: a bucket at 91 of 100 (past 90 %, over the default warning
	// threshold of 80 and under the critical 95), filled through admission;
	// another consumer refused a create; claims created through the API,
	// one granted and one denied.
	c := quotatest.NewClient(t, leader.Config)
	full := quotatest.NewFixture(t, c)
	full.SecretsPolicy(100)
	for i := range 91 {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: full.NS}}
		if err := c.Create(ctx, s); err != nil {
			t.Fatalf("create %d of 91: %v", i, err)
		}
	}
	full.WaitBucket(quotatest.N(100, 91, 9), "secrets")
	refused := quotatest.NewFixture(t, c)
	refused.SecretsPolicy(1)
	for i := range 2 {
		_ = c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: refused.NS}})
	}
	api := quotatest.NewFixture(t, c)
	api.Register("cpus")
	api.Grant("g", map[string][]quotatest.Bucket{"cpus": {{Amount: 1}}})
	api.Claim("fits", quotatest.R("cpus", 1))
	api.Decided("fits")
	api.Claim("waits", quotatest.R("cpus", 1))
	api.Decided("waits")

	// The shipped alert fires for the bucket past 90 %.
	alert := prom.WaitAlert(t, "QuotaBucketWarning", map[string]string{"consumer_name": full.Org.Name}, 2*time.Minute)
	t.Logf("alert firing: %v", alert)

	// Only the leader exports bucket series.
	byInstance := prom.Query(t, `count by (instance) (milo_quota_bucket_limit)`)
	if len(byInstance) != 1 || byInstance[0].Metric["instance"] != instanceOf(leader) {
		t.Errorf("bucket series by instance = %v, want only the leader %s", byInstance, instanceOf(leader))
	}
	if got := prom.Query(t, fmt.Sprintf(`milo_quota_bucket_limit{instance=%q}`, instanceOf(standby))); len(got) != 0 {
		t.Errorf("the standby %s exports %d bucket series", standby.Name, len(got))
	}

	// Every dashboard query parses and returns data. Rates need two scrapes
	// in their window after the traffic above.
	time.Sleep(3 * time.Second)
	admissionFamily := len(prom.Query(t, `milo_quota_admission_result_total`)) > 0
	for _, q := range dashboardQueries(t) {
		expr := strings.NewReplacer("$__rate_interval", "1m", "$resource_type", ".*").Replace(q.expr)
		if !admissionFamily && strings.Contains(expr, "milo_quota_admission_result_total") {
			t.Logf("panel %q: milo_quota_admission_result_total is not counted by admission yet; query only parsed", q.panel)
			prom.Query(t, expr)
			continue
		}
		var got []promtest.Sample
		err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
			got = prom.Query(t, expr)
			return len(got) > 0, nil
		})
		if err != nil {
			t.Errorf("panel %q: no data for %s", q.panel, expr)
			continue
		}
		t.Logf("panel %q: %d series, e.g. %v", q.panel, len(got), got[0])
	}
}

func instanceOf(r *quotatest.Replica) string {
	return promtest.Target{Config: r.Config}.Instance()
}

type dashboardQuery struct{ panel, expr string }

// dashboardQueries are the expressions of every panel of the shipped
// dashboard.
func dashboardQueries(t *testing.T) []dashboardQuery {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(monitoringDir(), "quotaplane-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("the dashboard is not JSON: %v", err)
	}
	var out []dashboardQuery
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, dashboardQuery{p.Title, tg.Expr})
		}
	}
	if len(out) == 0 {
		t.Fatal("the dashboard has no queries")
	}
	return out
}
