package monitoring

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotaplane/quotaplane/test/quotatest"
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
	prometheus := lookPath(t, "prometheus")
	bin := quotatest.BuildBinary(t)
	quotatest.Exclusive(t)
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
	promPort := quotatest.FreePort(t)
	startPrometheus(t, prometheus, dir, promPort, replicas)
	prom := promClient{base: fmt.Sprintf("http://127.0.0.1:%d", promPort)}
	prom.waitTargetsUp(t, len(replicas))

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
	alert := prom.waitAlert(t, "QuotaBucketWarning", map[string]string{"consumer_name": full.Org.Name}, 2*time.Minute)
	t.Logf("alert firing: %v", alert)

	// Only the leader exports bucket series.
	byInstance := prom.query(t, `count by (instance) (milo_quota_bucket_limit)`)
	if len(byInstance) != 1 || byInstance[0].Metric["instance"] != instanceOf(leader) {
		t.Errorf("bucket series by instance = %v, want only the leader %s", byInstance, instanceOf(leader))
	}
	if got := prom.query(t, fmt.Sprintf(`milo_quota_bucket_limit{instance=%q}`, instanceOf(standby))); len(got) != 0 {
		t.Errorf("the standby %s exports %d bucket series", standby.Name, len(got))
	}

	// Every dashboard query parses and returns data. Rates need two scrapes
	// in their window after the traffic above.
	time.Sleep(3 * time.Second)
	admissionFamily := len(prom.query(t, `milo_quota_admission_result_total`)) > 0
	for _, q := range dashboardQueries(t) {
		expr := strings.NewReplacer("$__rate_interval", "1m", "$resource_type", ".*").Replace(q.expr)
		if !admissionFamily && strings.Contains(expr, "milo_quota_admission_result_total") {
			t.Logf("panel %q: milo_quota_admission_result_total is not counted by admission yet; query only parsed", q.panel)
			prom.query(t, expr)
			continue
		}
		var got []sample
		err := wait.PollUntilContextTimeout(ctx, time.Second, 30*time.Second, true, func(context.Context) (bool, error) {
			got = prom.query(t, expr)
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
	u, _ := url.Parse(r.Config.Host)
	return u.Host
}

// startPrometheus runs Prometheus on 127.0.0.1:port with its data in dir,
// scraping every replica each second with the replica's own admin
// certificate, and the shipped rules with `for:` shortened to 1s.
func startPrometheus(t *testing.T, bin, dir string, port int, replicas []*quotatest.Replica) {
	t.Helper()
	rules, err := os.ReadFile(filepath.Join(monitoringDir(), "quotaplane-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	rulesFile := filepath.Join(dir, "rules.yaml")
	if err := os.WriteFile(rulesFile, forLine.ReplaceAll(rules, []byte("${1}1s")), 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\nrule_files: [%q]\nscrape_configs:\n", rulesFile)
	for _, r := range replicas {
		files := map[string][]byte{"ca.crt": r.Config.CAData, "client.crt": r.Config.CertData, "client.key": r.Config.KeyData}
		for name, data := range files {
			if err := os.WriteFile(filepath.Join(dir, r.Name+"-"+name), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		fmt.Fprintf(&cfg, `  - job_name: quotaplane-%[1]s
    scheme: https
    metrics_path: /metrics
    tls_config:
      ca_file: %[2]q
      cert_file: %[3]q
      key_file: %[4]q
    static_configs:
      - targets: [%[5]q]
    relabel_configs:
      - target_label: job
        replacement: quotaplane
`, r.Name, filepath.Join(dir, r.Name+"-ca.crt"), filepath.Join(dir, r.Name+"-client.crt"), filepath.Join(dir, r.Name+"-client.key"), instanceOf(r))
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address=127.0.0.1:"+strconv.Itoa(port), "--log.level=warn")
	out := &quotatest.SyncBuffer{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("prometheus output:\n%s", out.Tail())
		}
	})
}

type promClient struct{ base string }

type sample struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}

func (p promClient) get(t *testing.T, path string, params url.Values, out any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+path+"?"+params.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Status string          `json:"status"`
		Error  string          `json:"error"`
		Data   json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("%s: %v: %s", path, err, body)
	}
	if env.Status != "success" {
		return fmt.Errorf("%s %v: %s", path, params, env.Error)
	}
	return json.Unmarshal(env.Data, out)
}

// query runs an instant query; a query that does not parse fails the test.
func (p promClient) query(t *testing.T, expr string) []sample {
	t.Helper()
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get(t, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	var out []sample
	if data.ResultType == "vector" {
		if err := json.Unmarshal(data.Result, &out); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

func (p promClient) waitTargetsUp(t *testing.T, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		var data struct {
			Result []sample `json:"result"`
		}
		if err := p.get(t, "/api/v1/query", url.Values{"query": {`up{job="quotaplane"} == 1`}}, &data); err != nil {
			return false, nil
		}
		return len(data.Result) == n, nil
	})
	if err != nil {
		t.Fatalf("Prometheus does not scrape the %d replicas: %v", n, err)
	}
}

// waitAlert waits until the alert name with the labels want is firing.
func (p promClient) waitAlert(t *testing.T, name string, want map[string]string, timeout time.Duration) map[string]string {
	t.Helper()
	var firing map[string]string
	var seen []map[string]string
	err := wait.PollUntilContextTimeout(t.Context(), time.Second, timeout, true, func(context.Context) (bool, error) {
		var data struct {
			Alerts []struct {
				Labels map[string]string `json:"labels"`
				State  string            `json:"state"`
			} `json:"alerts"`
		}
		if err := p.get(t, "/api/v1/alerts", nil, &data); err != nil {
			return false, nil
		}
		seen = seen[:0]
	alerts:
		for _, a := range data.Alerts {
			seen = append(seen, a.Labels)
			if a.Labels["alertname"] != name || a.State != "firing" {
				continue
			}
			for k, v := range want {
				if a.Labels[k] != v {
					continue alerts
				}
			}
			firing = a.Labels
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("alert %s %v did not fire within %s; alerts: %v", name, want, timeout, seen)
	}
	return firing
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
