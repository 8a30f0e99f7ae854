// Package credential keeps a member webhook's quota-plane credential alive
// (docs/clusters.md, "The webhook's credential").
//
// When the webhook reaches the quota plane with a service-account token, a
// Credential mints a successor for the same service account (TokenRequest,
// create on serviceaccounts/token, with the token in use) before the one in
// use is 60% through its lifetime, swaps it in for every request the
// webhook's quota-plane clients make, and writes it into the member
// cluster's kubeconfig Secret so that a restart starts with it. A failed
// refresh keeps the token in use and is retried with backoff.
//
// It owns the token and nothing else: it never decides what the token may
// do (the quota plane's RBAC does) and it never makes a token for any
// service account but the one the token names.
package credential
