package credential

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func jwt(payload string) string {
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc([]byte(payload)) + "." + enc([]byte("signature"))
}

func TestParse(t *testing.T) {
	sa := `"sub":"system:serviceaccount:kube-system:webhook-east"`
	for name, tc := range map[string]struct {
		raw     string
		want    Token
		wantErr bool
	}{
		"a TokenRequest token": {raw: jwt(`{` + sa + `,"iat":1000,"nbf":1000,"exp":4600}`),
			want: Token{Namespace: "kube-system", Name: "webhook-east", IssuedAt: time.Unix(1000, 0), Expires: time.Unix(4600, 0)}},
		"no iat: nbf":                {raw: jwt(`{` + sa + `,"nbf":2000,"exp":4600}`), want: Token{Namespace: "kube-system", Name: "webhook-east", IssuedAt: time.Unix(2000, 0), Expires: time.Unix(4600, 0)}},
		"a legacy Secret token":      {raw: jwt(`{` + sa + `}`), wantErr: true},
		"a user's token":             {raw: jwt(`{"sub":"alice","exp":4600}`), wantErr: true},
		"not a JWT":                  {raw: "0123456789abcdef", wantErr: true},
		"a payload that is not JSON": {raw: "a.bm90IGpzb24.c", wantErr: true},
	} {
		t.Run(name, func(t *testing.T) {
			got, err := Parse(tc.raw)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Parse: %v; want an error: %t", err, tc.wantErr)
			}
			if tc.wantErr {
				return
			}
			tc.want.Raw = tc.raw
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRefreshAt(t *testing.T) {
	issued := time.Unix(1000, 0)
	tok := Token{IssuedAt: issued, Expires: issued.Add(10 * time.Hour)}
	for name, tc := range map[string]struct {
		every time.Duration
		want  time.Time
	}{
		"60% of the lifetime":       {want: issued.Add(6 * time.Hour)},
		"every, when sooner":        {every: time.Second, want: issued.Add(time.Second)},
		"every, when later ignored": {every: 8 * time.Hour, want: issued.Add(6 * time.Hour)},
	} {
		if got := tok.refreshAt(tc.every); !got.Equal(tc.want) {
			t.Errorf("%s: refreshAt = %s; want %s", name, got, tc.want)
		}
	}
}
