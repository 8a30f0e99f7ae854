package history

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMergeKeepsRefusalsBeforeRoutineEntries(t *testing.T) {
	at := func(i int) time.Time { return time.Unix(int64(i), 0).UTC() }
	e := func(i int, event string) Entry {
		return Entry{Time: at(i), Event: event, Object: ObjectRef{Kind: "C", Name: fmt.Sprint(i)}}
	}
	names := func(es []Entry) []string {
		var out []string
		for _, x := range es {
			out = append(out, x.Object.Name)
		}
		return out
	}
	tests := []struct {
		name               string
		existing, incoming []Entry
		limit              int
		want               []string
	}{
		{"under the limit: everything, oldest first", []Entry{e(2, ClaimGranted)}, []Entry{e(1, ClaimDenied), e(3, GrantCreated)}, 5, []string{"1", "2", "3"}},
		{"over: the oldest routine entries go first",
			[]Entry{e(1, ClaimDenied), e(2, ClaimGranted), e(3, ClaimGranted)}, []Entry{e(4, AdmissionRefused), e(5, ClaimReleased)}, 3,
			[]string{"1", "4", "5"}},
		{"routine traffic never pushes a refusal out",
			[]Entry{e(1, AdmissionRefused)}, []Entry{e(2, ClaimGranted), e(3, ClaimGranted), e(4, ClaimGranted), e(5, ClaimGranted)}, 2,
			[]string{"1", "5"}},
		{"only refusals: the oldest goes",
			[]Entry{e(1, ClaimDenied), e(2, AdmissionRefused)}, []Entry{e(3, ClaimDenied)}, 2,
			[]string{"2", "3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if d := cmp.Diff(tt.want, names(Merge(tt.existing, tt.incoming, tt.limit))); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestConfigMapNameIsValidAndUnique(t *testing.T) {
	a := ConfigMapName(Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Organization", Name: "Acme_Corp.with.a.very.long.name.that.goes.on.and.on"})
	b := ConfigMapName(Consumer{APIGroup: "resourcemanager.miloapis.com", Kind: "Project", Name: "Acme_Corp.with.a.very.long.name.that.goes.on.and.on"})
	if a == b || len(a) > 63 {
		t.Errorf("names %q and %q", a, b)
	}
	if want := "quota-history-organization-acme-corp-with-a-very-"; a[:len(want)] != want {
		t.Errorf("name %q", a)
	}
}

// TestPrintShortFits: the default table fits its width, cutting the
// longest cells with "…", and leaves the consumer out when the query named
// it.
func TestPrintShortFits(t *testing.T) {
	long := strings.Repeat("x", 300)
	rows := []Row{{Consumer: Consumer{Kind: "Organization", Name: "acme-" + long}, Entry: Entry{Time: time.Now(), Event: ClaimDenied,
		Object: ObjectRef{Kind: "ResourceClaim", Namespace: "team-" + long, Name: "big"}, Message: "requested 5 units " + long}}}
	for _, one := range []bool{false, true} {
		var b strings.Builder
		PrintShort(&b, rows, Width, one)
		for _, l := range strings.Split(strings.TrimRight(b.String(), "\n"), "\n") {
			if n := len([]rune(l)); n > Width {
				t.Errorf("a line %d wide:\n%s", n, l)
			}
		}
		if !strings.Contains(b.String(), "requested 5 units x") || !strings.Contains(b.String(), "…") {
			t.Errorf("the message is not shown, cut:\n%s", b.String())
		}
		if got := strings.Contains(b.String(), "CONSUMER"); got == one {
			t.Errorf("oneConsumer %v: CONSUMER column shown %v:\n%s", one, got, b.String())
		}
	}
}

// TestExplainNamesWhatWasAsked: with no decision to show, the explanation
// names what was asked — an object, or a control plane's objects when only
// --control-plane was given — never an empty placeholder.
func TestExplainNamesWhatWasAsked(t *testing.T) {
	for _, tc := range []struct {
		name string
		q    Query
		want string
	}{
		{"an object", Query{ObjectKind: "Secret", ObjectNamespace: "default", ObjectName: "db"}, "is about Secret default/db;"},
		{"a control plane's objects", Query{Namespace: "project-web-quota"},
			"is about an object of the control plane whose quota is kept in namespace project-web-quota; check the plane's name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Explain(nil, nil, tc.q)
			if !strings.Contains(got, tc.want) || strings.Contains(got, "about  ") || strings.Contains(got, "about ;") {
				t.Errorf("Explain(%+v) = %q; want it to contain %q", tc.q, got, tc.want)
			}
		})
	}
}
