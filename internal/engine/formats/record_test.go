package formats

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// TestPendingClaimFormat: the journal's record keeps its short keys — what
// earlier leaders wrote must stay readable by later ones and by verify —
// and never records the request's outcome.
func TestPendingClaimFormat(t *testing.T) {
	p := &PendingClaim{Namespace: "ns", Name: "c", Policy: "p", Resource: "widgets.v1.x.io", ObjectUID: "u",
		Created: metav1.Unix(1, 0).Rfc3339Copy(), Update: true, ClaimUID: "cu", Outcome: OutcomeStored,
		Replaces: []ReplacedClaim{{Namespace: "ns", Name: "old", UID: "o"}},
		Growth:   []quotav1alpha1.ResourceRequest{{ResourceType: "x.io/a", Amount: 2}}}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]any
	if err := json.Unmarshal(raw, &keys); err != nil {
		t.Fatal(err)
	}
	var got []string
	for k := range keys {
		got = append(got, k)
	}
	want := []string{"c", "cu", "gr", "n", "ns", "p", "r", "s", "u", "upd", "x"}
	if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("recorded keys (-want +got):\n%s", diff)
	}
	var back PendingClaim
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	p.Outcome = OutcomeUnknown // not recorded
	if diff := cmp.Diff(p, &back); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// TestPendingKeys: a release is keyed apart from any claim name; a claim written
// under another name is found by the key it was admitted under.
func TestPendingKeys(t *testing.T) {
	rel := &PendingClaim{Namespace: "ns", Name: "a", Release: true}
	c := &quotav1alpha1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a-1f2e",
		Annotations: map[string]string{quotav1alpha1.AnnotationGrantKey: "ns/a"}}}
	got := []string{Key("", "cluster"), Key("ns", "a"), rel.Key(), rel.GrowthID(), ProvisionalID("ns/a"), GrantKeyOf(c)}
	want := []string{"cluster", "ns/a", "ns/a#release", "update:ns/a#release", "admission:ns/a", "ns/a"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("keys (-want +got):\n%s", diff)
	}
}

// TestDecodeLedger: a missing or hand-edited ledger says what is wrong.
func TestDecodeLedger(t *testing.T) {
	cases := map[string]struct {
		data      map[string]string
		wantEpoch int64
		wantState LedgerState
		wantErr   bool
	}{
		"new":          {data: nil, wantState: LedgerState{Inflight: map[string]string{}}},
		"stamped":      {data: map[string]string{LedgerEpochKey: "7", LedgerHolderKey: "a", LedgerInflightKey: `{"u":"ns/c"}`}, wantEpoch: 7, wantState: LedgerState{Inflight: map[string]string{"u": "ns/c"}, Holder: "a"}},
		"bad epoch":    {data: map[string]string{LedgerEpochKey: "seven"}, wantErr: true},
		"bad inflight": {data: map[string]string{LedgerEpochKey: "1", LedgerInflightKey: "{"}, wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			epoch, state, err := DecodeLedger(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "s", Name: LedgerName}, Data: tc.data})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err %v; want error %t", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			if diff := cmp.Diff([]any{tc.wantEpoch, tc.wantState}, []any{epoch, state}); diff != "" {
				t.Errorf("epoch, state (-want +got):\n%s", diff)
			}
		})
	}
}
