package review

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
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

// TestWhatIfWritesAmountsAsRefusals: what-if's table writes every amount as
// a refusal writes it, from the registrations' units: memory (bytes, read
// in MiB) as "134217728 bytes (128 MiB)", cpu (millicores, read in cores)
// as "500 millicores" — the words of the refusal it prints for the object
// that does not fit.
func TestWhatIfWritesAmountsAsRefusals(t *testing.T) {
	bin := quotatest.BuildBinary(t)
	w := newWorld(t, "web")
	web := w.projects[0]
	ctx := context.Background()
	cpu, mem := w.org+".example.com/requests.cpu", w.org+".example.com/requests.memory"
	for _, r := range []struct {
		rt, base, display string
		factor            int64
		one               string
	}{
		{cpu, "millicore", "core", 1000, "1m"},
		{mem, "byte", "MiB", 1 << 20, "1"},
	} {
		one := resource.MustParse(r.one)
		reg := &quotav1alpha1.ResourceRegistration{ObjectMeta: metav1.ObjectMeta{Name: strings.ReplaceAll(strings.ReplaceAll(r.rt, "/", "-"), ".example.com", "")},
			Spec: quotav1alpha1.ResourceRegistrationSpec{
				ConsumerType: quotav1alpha1.ConsumerTypeRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project"},
				Type:         quotav1alpha1.RegistrationTypeAllocation, ResourceType: quotav1alpha1.ResourceType(r.rt),
				BaseUnit: r.base, DisplayUnit: r.display, UnitConversionFactor: r.factor, BaseUnitQuantity: &one,
				ClaimingResources: []quotav1alpha1.ClaimingResource{{Kind: "ConfigMap"}}}}
		w.create(reg)
		w.poll("registration "+reg.Name+" to be active", func() bool {
			got := &quotav1alpha1.ResourceRegistration{}
			return w.admin.Get(ctx, client.ObjectKeyFromObject(reg), got) == nil && meta.IsStatusConditionTrue(got.Status.Conditions, quotav1alpha1.RegistrationConditionActive)
		})
	}
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Name: "requests", Namespace: w.orgNS}, Spec: quotav1alpha1.ResourceGrantSpec{
		ConsumerRef: w.consumer("Project", web), Allowances: []quotav1alpha1.Allowance{
			{ResourceType: quotav1alpha1.ResourceType(cpu), Buckets: []quotav1alpha1.GrantBucket{{Amount: 1000}}},
			{ResourceType: quotav1alpha1.ResourceType(mem), Buckets: []quotav1alpha1.GrantBucket{{Amount: 1 << 30}}}}}}
	w.create(g)
	w.poll("grant requests to be active", func() bool {
		got := &quotav1alpha1.ResourceGrant{}
		return w.admin.Get(ctx, client.ObjectKeyFromObject(g), got) == nil && meta.IsStatusConditionTrue(got.Status.Conditions, quotav1alpha1.GrantConditionActive)
	})
	p := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: w.org + "-requests"}}
	p.Spec.Trigger.Resource = quotav1alpha1.TriggerResource{APIVersion: "v1", Kind: "ConfigMap"}
	p.Spec.Trigger.Constraints = []quotav1alpha1.Constraint{{Expression: fmt.Sprintf("trigger.metadata.namespace == %q && has(trigger.data) && 'mem' in trigger.data", w.ns)}}
	p.Spec.Target.ResourceClaimTemplate.Spec = quotav1alpha1.ResourceClaimTemplateSpec{
		ConsumerRef: quotav1alpha1.TemplateConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: "Project", Name: web},
		Requests: []quotav1alpha1.ClaimTemplateRequest{
			{ResourceType: cpu, Amount: intstr.FromString("{{ trigger.data.cpu }}")},
			{ResourceType: mem, Amount: intstr.FromString("{{ trigger.data.mem }}")}},
	}
	w.create(p)
	requests := func(name, cpu, mem string) *corev1.ConfigMap {
		return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: w.ns},
			Data: map[string]string{"cpu": cpu, "mem": mem}}
	}
	quotatest.NewFixture(t, w.admin).WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("configmaps"), requests("probe", "1m", "1"), p.Name, 1)

	y1, _ := yaml.Marshal(requests("small", "500m", "128Mi"))
	y2, _ := yaml.Marshal(requests("large", "600m", "64Mi"))
	code, out, errOut := runWhatIf(t, bin, "---\n"+string(y1)+"---\n"+string(y2), "-f", "-")
	if code != whatif.ExitRefused {
		t.Fatalf("500m then 600m of 1000m: exit %d, want 1\n%s%s", code, out, errOut)
	}
	if strings.Contains(errOut, "base units") {
		t.Errorf("the admin's what-if could not read the units: %s", errOut)
	}
	mustContain(t, out,
		"500 millicores of "+cpu+" for Project/"+web,
		"134217728 bytes (128 MiB) of "+mem+" for Project/"+web,
		"600 millicores of "+cpu+" for Project/"+web,
		"67108864 bytes (64 MiB) of "+mem+" for Project/"+web)
	// The refusal printed for "large" says its cpu in the same words.
	refusal := regexp.MustCompile(`objects\[1\] ConfigMap large: .*requested (\S+ \S+) of ` + regexp.QuoteMeta(cpu)).FindStringSubmatch(out)
	if refusal == nil || refusal[1] != "600 millicores" {
		t.Fatalf("the refusal of large does not say its cpu as %q:\n%s", "600 millicores", out)
	}
	// The buckets' numbers, in the registrations' units.
	for _, rowText := range []string{
		`Project/` + regexp.QuoteMeta(web) + `\s+` + regexp.QuoteMeta(cpu) + `\s+1000 millicores \(1 core\)\s+0 millicores \(0 cores\)\s+\+500 millicores\s+500 millicores\s+600 millicores`,
		`Project/` + regexp.QuoteMeta(web) + `\s+` + regexp.QuoteMeta(mem) + `\s+1073741824 bytes \(1024 MiB\)\s+0 bytes \(0 MiB\)\s+\+134217728 bytes \(128 MiB\)\s+134217728 bytes \(128 MiB\)\s`,
	} {
		if !regexp.MustCompile(rowText).MatchString(out) {
			t.Errorf("no bucket row matches %s:\n%s", rowText, out)
		}
	}
}
