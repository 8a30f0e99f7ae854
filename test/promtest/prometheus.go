package promtest

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
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"

	"github.com/quotaplane/quotaplane/test/quotatest"
)

// Target is an API server for Prometheus to scrape, with the client
// certificate of its configuration.
type Target struct {
	Name   string
	Config *rest.Config
}

// Instance is the target's address, Prometheus' instance label.
func (p Target) Instance() string {
	u, _ := url.Parse(p.Config.Host)
	return u.Host
}

// Server is a running Prometheus server.
type Server struct{ base string }

// Start runs Prometheus (bin, Debian's package) on a free port of
// 127.0.0.1 with its data in dir, scraping every target each interval and
// evaluating rulesFile (when set) as often. It is killed when the test ends.
func Start(t testing.TB, bin, dir string, interval time.Duration, rulesFile string, targets ...Target) *Server {
	t.Helper()
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "global:\n  scrape_interval: %[1]s\n  scrape_timeout: %[1]s\n  evaluation_interval: %[1]s\n", interval)
	if rulesFile != "" {
		fmt.Fprintf(&cfg, "rule_files: [%q]\n", rulesFile)
	}
	cfg.WriteString("scrape_configs:\n")
	for _, r := range targets {
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
`, r.Name, filepath.Join(dir, r.Name+"-ca.crt"), filepath.Join(dir, r.Name+"-client.crt"), filepath.Join(dir, r.Name+"-client.key"), r.Instance())
	}
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(cfg.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	port := quotatest.FreePort(t)
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
	return &Server{base: fmt.Sprintf("http://127.0.0.1:%d", port)}
}

// Sample is one series of a query's result.
type Sample struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
}

func (p *Server) get(t testing.TB, path string, params url.Values, out any) error {
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

// Query runs an instant query; a query that does not parse fails the test.
func (p *Server) Query(t testing.TB, expr string) []Sample {
	t.Helper()
	var data struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := p.get(t, "/api/v1/query", url.Values{"query": {expr}}, &data); err != nil {
		t.Fatalf("query %s: %v", expr, err)
	}
	var out []Sample
	if data.ResultType == "vector" {
		if err := json.Unmarshal(data.Result, &out); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// WaitTargetsUp waits until Prometheus scrapes n targets successfully.
func (p *Server) WaitTargetsUp(t testing.TB, n int) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		var data struct {
			Result []Sample `json:"result"`
		}
		if err := p.get(t, "/api/v1/query", url.Values{"query": {`up{job="quotaplane"} == 1`}}, &data); err != nil {
			return false, nil
		}
		return len(data.Result) == n, nil
	})
	if err != nil {
		t.Fatalf("Prometheus does not scrape the %d targets: %v", n, err)
	}
}

// WaitAlert waits until the alert name with the labels want is firing.
func (p *Server) WaitAlert(t testing.TB, name string, want map[string]string, timeout time.Duration) map[string]string {
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
