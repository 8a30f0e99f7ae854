package v1alpha1

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"

	kjson "sigs.k8s.io/json"
)

// An amount of a grant's bucket, a claim's request or a grant template's
// bucket may be written as a quantity ("16Gi") when serve's admission
// converts it to an integer in base units, which is what is stored and
// served. The typed objects keep such a quantity in AmountQuantity until
// then; an integer written as a string ("5") is the integer.

// UnmarshalJSON reads amount as an integer or a quantity.
func (b *GrantBucket) UnmarshalJSON(data []byte) error {
	type plain GrantBucket
	return unmarshalAmount(data, (*plain)(b), &b.Amount, &b.AmountQuantity)
}

// UnmarshalJSON reads amount as an integer or a quantity.
func (r *ResourceRequest) UnmarshalJSON(data []byte) error {
	type plain ResourceRequest
	return unmarshalAmount(data, (*plain)(r), &r.Amount, &r.AmountQuantity)
}

// UnmarshalJSON reads amount as an integer or a quantity.
func (b *GrantTemplateBucket) UnmarshalJSON(data []byte) error {
	type plain GrantTemplateBucket
	return unmarshalAmount(data, (*plain)(b), &b.Amount, &b.AmountQuantity)
}

// unmarshalAmount decodes data into into (the struct without this method)
// and then its amount: a number is the amount, a string that is an integer
// too, any other string is kept as the quantity.
func unmarshalAmount(data []byte, into any, amount *int64, quantity *string) error {
	*quantity = ""
	if !stringAmount(data) { // the common case: one decode
		return kjson.UnmarshalCaseSensitivePreserveInts(data, into)
	}
	var fields map[string]json.RawMessage
	if err := kjson.UnmarshalCaseSensitivePreserveInts(data, &fields); err != nil {
		return err
	}
	var s string
	if err := json.Unmarshal(fields["amount"], &s); err != nil {
		return err
	}
	// Decode the rest with amount left out, then set it.
	delete(fields, "amount")
	rest, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(rest, into); err != nil {
		return err
	}
	if n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64); err == nil {
		*amount, *quantity = n, ""
		return nil
	}
	*amount, *quantity = 0, s
	return nil
}

// stringAmount tells whether data (one JSON object, whose nested objects
// have no "amount") may hold amount as a string; a false "true" only costs
// the slower decode.
func stringAmount(data []byte) bool {
	for rest := data; ; {
		i := bytes.Index(rest, []byte(`"amount"`))
		if i < 0 {
			return false
		}
		rest = bytes.TrimLeft(rest[i+len(`"amount"`):], " \t\r\n")
		if len(rest) > 0 && rest[0] == ':' {
			rest = bytes.TrimLeft(rest[1:], " \t\r\n")
			if len(rest) > 0 && rest[0] == '"' {
				return true
			}
		}
	}
}
