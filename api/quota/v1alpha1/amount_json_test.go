package v1alpha1

import (
	"encoding/json"
	"testing"
)

func TestAmountAsQuantity(t *testing.T) {
	for _, tc := range []struct {
		in       string
		amount   int64
		quantity string
		wantErr  bool
	}{
		{in: `{"resourceType":"a/b","amount":5}`, amount: 5},
		{in: `{"resourceType":"a/b","amount": "7"}`, amount: 7},
		{in: `{"resourceType":"a/b", "amount" : "16Gi"}`, quantity: "16Gi"},
		{in: `{"resourceType":"a/b","dimensions":[{"key":"amount","value":"x"}],"amount":3}`, amount: 3},
		{in: `{"resourceType":"a/b","amount":1.5}`, wantErr: true},
	} {
		var r ResourceRequest
		err := json.Unmarshal([]byte(tc.in), &r)
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: error %v, want error %v", tc.in, err, tc.wantErr)
		}
		if err != nil {
			continue
		}
		if r.Amount != tc.amount || r.AmountQuantity != tc.quantity || r.ResourceType != "a/b" {
			t.Errorf("%s: got %+v", tc.in, r)
		}
		out, _ := json.Marshal(r)
		if tc.quantity == "" && string(out) == "" {
			t.Errorf("no output")
		}
	}
	var b GrantBucket
	if err := json.Unmarshal([]byte(`{"amount":"2Ki","dimensions":[{"key":"k","value":"v"}]}`), &b); err != nil || b.AmountQuantity != "2Ki" || len(b.Dimensions) != 1 {
		t.Errorf("bucket: %+v %v", b, err)
	}
}
