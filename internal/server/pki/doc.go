// Package pki creates, on first start, the certificates and keys quotaplane
// serve needs under <data-dir>/pki, and reuses them afterwards: a CA, the
// serving certificate, an admin client certificate (group system:masters) and
// the service-account signing key.
//
// It never overwrites a valid file; it only replaces a serving certificate that
// is about to expire or does not cover the address being served.
package pki
