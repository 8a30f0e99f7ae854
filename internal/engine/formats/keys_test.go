package formats

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestKeys(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{AdmissionGrantsPrefix("/registry"), "/registry/quotaplane/admission-grants/"},
		{AdmissionGrantsPrefix("/registry/"), "/registry/quotaplane/admission-grants/"},
		{FailOpenPrefix("/registry"), "/registry/quotaplane/fail-open/"},
		{FailOpenKey("/other", "1234-5678"), "/other/quotaplane/fail-open/1234-5678"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

func TestEtcdFileRoundTrip(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadEtcdFile(dir); err == nil {
		t.Fatal("reading a missing file succeeded")
	}
	want := EtcdLocation{Servers: []string{"http://127.0.0.1:2379"}, Prefix: "/registry"}
	if err := WriteEtcdFile(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := ReadEtcdFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}
