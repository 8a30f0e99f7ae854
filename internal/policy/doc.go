// Package policy compiles and evaluates ClaimCreationPolicies: CEL
// constraints over `trigger` (the object), `user` and `requestInfo`, and
// templates whose `{{ CEL }}` segments render a ResourceClaim — names,
// dimensions and amounts computed from the object.
//
// It has no client and no I/O: the policy controller compiles to report
// Ready, admission compiles once per policy generation and evaluates per
// request.
package policy
