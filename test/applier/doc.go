// Package applier applies objects as a GitOps tool does — one server-side
// apply each, sent once, every answer seen with its status code and
// Retry-After — for the tests of applies in any order (docs/tenancy.md).
package applier
