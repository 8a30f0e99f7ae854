package credential

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apiserver/pkg/authentication/serviceaccount"
)

// Token is a service-account token as its payload says, read without
// verifying it: the quota plane verifies it, the webhook only needs to know
// whose it is and when it ends.
type Token struct {
	Raw string
	// Namespace and Name are the service account's, from the subject.
	Namespace, Name   string
	IssuedAt, Expires time.Time
}

// Parse reads a JWT's payload. It fails for a token that is not a
// service account's with an expiry: such a credential cannot be refreshed
// here (a client certificate, a static token, an OIDC token).
func Parse(raw string) (Token, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return Token{}, errors.New("not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return Token{}, fmt.Errorf("the JWT's payload: %w", err)
	}
	var claims struct {
		Subject   string `json:"sub"`
		IssuedAt  int64  `json:"iat"`
		NotBefore int64  `json:"nbf"`
		Expires   int64  `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return Token{}, fmt.Errorf("the JWT's payload: %w", err)
	}
	ns, name, err := serviceaccount.SplitUsername(claims.Subject)
	if err != nil {
		return Token{}, fmt.Errorf("the JWT's subject %q is not a service account", claims.Subject)
	}
	if claims.Expires == 0 {
		return Token{}, fmt.Errorf("the token of service account %s/%s does not expire (a legacy Secret token): it cannot be refreshed; give a TokenRequest token (quotaplane kubeconfig --service-account)", ns, name)
	}
	issued := claims.IssuedAt
	if issued == 0 {
		issued = claims.NotBefore
	}
	return Token{Raw: raw, Namespace: ns, Name: name, IssuedAt: time.Unix(issued, 0), Expires: time.Unix(claims.Expires, 0)}, nil
}

// refreshAt is when a successor is due: 60% through the token's lifetime,
// or after at most every when it is positive.
func (t Token) refreshAt(every time.Duration) time.Time {
	life := t.Expires.Sub(t.IssuedAt)
	after := life * 6 / 10
	if every > 0 && every < after {
		after = every
	}
	return t.IssuedAt.Add(after)
}
