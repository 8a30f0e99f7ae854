// Package admissiontest holds the injected dependencies the unit tests of
// quotaplane's admission plugins share: a dynamic client that answers reads
// from fixed objects. It is imported only by tests; it never re-implements
// the API server (no writes, no watches, no defaulting, no validation).
package admissiontest
