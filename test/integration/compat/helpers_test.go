package compat

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotaplane/quotaplane/test/quotatest"
)

// clientWithWarnings is an admin client whose warnings are kept.
func clientWithWarnings(t *testing.T) (client.Client, *quotatest.Warnings) {
	t.Helper()
	w := &quotatest.Warnings{}
	cfg := rest.CopyConfig(srv.Config)
	cfg.WarningHandler = w
	return quotatest.NewClient(t, cfg), w
}

// table lists resource (a path under /apis) as kubectl get does, as a
// server-side Table, and returns its columns: name and priority.
func table(t *testing.T, path string) []metav1.TableColumnDefinition {
	t.Helper()
	hc, err := rest.HTTPClientFor(srv.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, strings.TrimSuffix(srv.Config.Host, "/")+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	var tab metav1.Table
	if err := json.Unmarshal(body, &tab); err != nil {
		t.Fatal(err)
	}
	return tab.ColumnDefinitions
}

// columns are the names of the columns of a table at a priority.
func columns(defs []metav1.TableColumnDefinition, priority int32) string {
	var out []string
	for _, d := range defs {
		if d.Priority == priority {
			out = append(out, d.Name)
		}
	}
	return strings.Join(out, ",")
}

// eventually polls f for up to 30 s.
func eventually(t *testing.T, what string, f func(ctx context.Context) (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		ok, err := f(ctx)
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("%s: not within 30s (last error: %v)", what, last)
	}
}

func mustContain(t *testing.T, err error, parts ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want one containing %q", parts)
	}
	for _, p := range parts {
		if !strings.Contains(err.Error(), p) {
			t.Fatalf("error %q does not contain %q", err, p)
		}
	}
}
