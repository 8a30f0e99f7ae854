package review

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/whatif"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

func runWhatIf(t *testing.T, bin string, stdin string, args ...string) (int, string, string) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"what-if", "--kubeconfig", srv.Kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr, cmd.Stdin = &stdout, &stderr, strings.NewReader(stdin)
	err := cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, stdout.String(), stderr.String()
	case errors.As(err, &exit):
		return exit.ExitCode(), stdout.String(), stderr.String()
	}
	t.Fatalf("running %s: %v", bin, err)
	return 0, "", ""
}

// TestWhatIf runs `quotaplane what-if` as a person or a pipeline does: a
// directory that fits (exit 0, a table), a file with a list that does not
// (exit 1, the refusal, -o json), standard input, and what cannot be
// reviewed (exit 2, saying why).
func TestWhatIf(t *testing.T) {
	bin := quotatest.BuildBinary(t)
	w := newWorld(t, "web")
	web := w.projects[0]
	w.grant("org", w.consumer("Organization", w.org), 6)
	w.grant("web", w.consumer("Project", web), 10)
	w.ready()

	dir := t.TempDir()
	write := func(name string, docs ...any) string {
		var b strings.Builder
		for _, d := range docs {
			y, err := yaml.Marshal(d)
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString("---\n")
			b.Write(y)
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	write("fits/a.yaml", w.configMap("a", web, 2), w.configMap("b", web, 1))
	write("fits/b.yaml", w.configMap("c", web, 3))
	code, out, errOut := runWhatIf(t, bin, "", "-f", filepath.Join(dir, "fits"))
	if code != whatif.ExitFits {
		t.Fatalf("a directory that fits: exit %d, want 0\n%s%s", code, out, errOut)
	}
	mustContain(t, out, "fits/a.yaml#1", "fits/a.yaml#2", "fits/b.yaml#1", "Fits", "Organization/"+w.org, "FITS: all 3 objects fit", "+6")

	list := map[string]any{"apiVersion": "v1", "kind": "List", "items": []any{w.configMap("d", web, 4), w.configMap("e", web, 3)}}
	over := write("over.yaml", list)
	code, out, errOut = runWhatIf(t, bin, "", "-f", over, "-o", "json")
	if code != whatif.ExitRefused {
		t.Fatalf("a list that does not fit: exit %d, want 1\n%s%s", code, out, errOut)
	}
	var st quotav1alpha1.QuotaReviewStatus
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	if st.Fits || len(st.Objects) != 2 || st.Objects[0].Result != quotav1alpha1.ReviewFits || st.Objects[1].Reason != quotav1alpha1.ReviewReasonQuotaExceeded {
		t.Fatalf("the list's review: %+v", st)
	}
	mustContain(t, st.Objects[1].Message, "Organization "+w.org+" has 2 of 6 available")

	code, out, errOut = runWhatIf(t, bin, "", "-f", over)
	if code != whatif.ExitRefused {
		t.Fatalf("a table of a set that does not fit: exit %d\n%s%s", code, out, errOut)
	}
	mustContain(t, out, "DOES NOT FIT: 1 of 2 objects would be refused", "objects[1] ConfigMap e: ", "QuotaExceeded")

	y, _ := yaml.Marshal(w.configMap("f", web, 1))
	code, out, errOut = runWhatIf(t, bin, string(y), "-f", "-")
	if code != whatif.ExitFits || !strings.Contains(out, "-#1") {
		t.Fatalf("standard input: exit %d\n%s%s", code, out, errOut)
	}

	for _, c := range []struct {
		name string
		args []string
		says string
	}{
		{"no files", nil, "give the manifests with -f"},
		{"a missing file", []string{"-f", filepath.Join(dir, "nope.yaml")}, "no such file"},
		{"bad output", []string{"-f", over, "-o", "yaml"}, "want table or json"},
		{"not yaml", []string{"-f", write("bad.yaml", "just a string")}, "bad.yaml"},
		{"no namespace allowed here", []string{"-f", over, "--as-group", "g"}, "spec.groups"},
	} {
		code, out, errOut := runWhatIf(t, bin, "", c.args...)
		if code != whatif.ExitError || !strings.Contains(errOut, c.says) {
			t.Errorf("%s: exit %d, want 2 saying %q\n%s%s", c.name, code, c.says, out, errOut)
		}
	}
	if n := len(w.claims()); n != 0 {
		t.Fatalf("what-if left %d claims", n)
	}
}
