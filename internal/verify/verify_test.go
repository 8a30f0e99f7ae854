package verify

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/planes"
	"github.com/quotaplane/quotaplane/internal/verify/report"
)

func TestOptionsFromDataDir(t *testing.T) {
	dir := t.TempDir()
	o := *NewOptions()
	o.DataDir = dir
	if _, err := o.complete(); err == nil || !strings.Contains(err.Error(), "--etcd-servers") {
		t.Errorf("without %s: %v, want an error that says to pass --etcd-servers", formats.EtcdFile, err)
	}
	loc := formats.EtcdLocation{Servers: []string{"http://127.0.0.1:1234"}, Prefix: "/p"}
	if err := formats.WriteEtcdFile(dir, loc); err != nil {
		t.Fatal(err)
	}
	got, err := o.complete()
	if err != nil {
		t.Fatal(err)
	}
	if got.Kubeconfig != filepath.Join(dir, "admin.kubeconfig") || !cmp.Equal(got.EtcdServers, loc.Servers) || got.EtcdPrefix != "/p" {
		t.Errorf("completed %+v, want the data directory's kubeconfig and etcd", got)
	}
	o.Kubeconfig, o.EtcdServers = "/elsewhere", []string{"https://etcd:2379"}
	if got, err = o.complete(); err != nil || got.Kubeconfig != "/elsewhere" || got.EtcdServers[0] != "https://etcd:2379" || got.EtcdPrefix != "/registry" {
		t.Errorf("explicit flags: %+v, %v; want them to win over the data directory", got, err)
	}
}

// TestOptionsInvalid: every bad flag is named at once. No kubeconfig is not
// one of them: $KUBECONFIG or ~/.kube/config may give it (clientconfig).
func TestOptionsInvalid(t *testing.T) {
	o := *NewOptions()
	o.EtcdServers, o.EtcdPrefix, o.EtcdCertFile, o.RecheckAfter = []string{"etcd:2379"}, "registry", "c.pem", -time.Second
	_, err := o.complete()
	for _, want := range []string{"must start with /", "must be an http:// or https:// URL", "go together", "must not be negative"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

func TestExitCode(t *testing.T) {
	clean, damaged := report.New(), report.New()
	damaged.Add(Discrepancy{Check: CheckOrphanClaim, ID: "x"})
	for _, tc := range []struct {
		name   string
		report *Report
		err    error
		want   int
	}{
		{"clean", clean, nil, ExitClean},
		{"discrepancies", damaged, nil, ExitDiscrepancies},
		{"could not run", nil, errors.New("unreachable"), ExitCannotRun},
	} {
		if got := ExitCode(tc.report, tc.err); got != tc.want {
			t.Errorf("%s: exit code %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestRecheckKeepsWhatBothReadingsFound(t *testing.T) {
	first, second := report.New(), report.New()
	for _, id := range []string{"moved", "damage"} {
		first.Add(Discrepancy{ID: id})
	}
	for _, id := range []string{"damage", "new"} {
		second.Add(Discrepancy{ID: id})
	}
	second.KeepOnly(first)
	if diff := cmp.Diff([]Discrepancy{{ID: "damage"}}, second.Discrepancies); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// checkInFlight: grants made at admission are overdue after 70 s plus the
// margin; ledger grants when their claim is stored without Granted; a ledger
// grant whose claim is gone is only noted.
func TestCheckInFlight(t *testing.T) {
	v := &verifier{o: Options{SystemNamespace: "qs"}}
	grant := func(name string, age time.Duration) *journalGrant {
		return &journalGrant{Namespace: "ns", Name: name, Policy: "p", Resource: "secrets.v1", ObjectUID: "u-" + name,
			Spec:    quotav1alpha1.ResourceClaimSpec{Requests: []quotav1alpha1.ResourceRequest{{ResourceType: "example.com/things", Amount: 1}}},
			Created: metav1.NewTime(time.Now().Add(-age)), etcdKey: "/registry/quotaplane/admission-grants/ns/" + name}
	}
	s := newReading()
	for _, g := range []*journalGrant{grant("fresh", time.Minute), grant("late", 10*time.Minute), grant("written", 10*time.Minute)} {
		s.journal[g.claimKey()] = g
	}
	s.journal["ns/written"].adopted = true
	s.ledger = map[string]string{"granted": "ns/a", "waiting": "ns/b", "gone": "ns/c"}
	s.ledgerClaims = map[string]bool{"granted": true, "waiting": false}
	r := report.New()
	v.checkInFlight(s, r)
	var got []string
	for _, d := range r.Discrepancies {
		got = append(got, d.ID)
	}
	want := []string{"inflight-overdue//registry/quotaplane/admission-grants/ns/late", "inflight-overdue/ledger/waiting"}
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if len(r.Notes) != 1 || !strings.Contains(r.Notes[0], "1 grants in flight whose claims are no longer stored") {
		t.Errorf("notes %q, want one about the ledger grant of a deleted claim", r.Notes)
	}
}

// TestPlaneConsumerReported: a claim of a plane's object charged to a
// Namespace (the root's, which the plane's is not) is reported; one charged
// to the plane's owner is not.
func TestPlaneConsumerReported(t *testing.T) {
	r := report.New()
	for _, consumer := range []quotav1alpha1.ConsumerRef{{Kind: "Namespace", Name: "default"}, {APIGroup: planes.Group, Kind: "Project", Name: "web"}} {
		c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "project-web", Name: "c-" + consumer.Kind, UID: types.UID("uid-" + consumer.Kind)},
			Spec: quotav1alpha1.ResourceClaimSpec{ConsumerRef: consumer}}
		planeConsumer(r, c, "ConfigMap default/x in control plane projects/web", "projects/web")
	}
	if len(r.Discrepancies) != 1 || r.Discrepancies[0].Check != CheckPlaneConsumer || !strings.Contains(r.Discrepancies[0].Problem, "Namespace default") {
		t.Fatalf("discrepancies %+v; want one plane-consumer naming Namespace default", r.Discrepancies)
	}
}
