package quotatest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/internal/verify"
)

// VerifyClean runs quotaplane verify against s — its API and its etcd — and
// fails the test, printing the report, when it finds any discrepancy.
func VerifyClean(t testing.TB, s *testserver.Server) {
	t.Helper()
	r := Verify(t, s)
	if len(r.Discrepancies) > 0 {
		var out strings.Builder
		r.Print(&out)
		t.Fatalf("verify found %d discrepancies:\n%s", len(r.Discrepancies), out.String())
	}
}

// Verify runs quotaplane verify against s, the etcd given, and returns its
// report.
func Verify(t testing.TB, s *testserver.Server) *verify.Report {
	t.Helper()
	o := *verify.NewOptions()
	o.Kubeconfig = s.Kubeconfig
	o.RecheckAfter = time.Second
	loc, err := formats.ReadEtcdFile(s.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	o.EtcdServers, o.EtcdCAFile, o.EtcdCertFile, o.EtcdKeyFile = s.EtcdServers, loc.CAFile, loc.CertFile, loc.KeyFile
	r, err := verify.Run(context.Background(), o)
	if err != nil {
		t.Fatalf("verify could not run: %v", err)
	}
	return r
}
