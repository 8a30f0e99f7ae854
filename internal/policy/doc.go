// Package policy compiles and evaluates ClaimCreationPolicies and
// GrantCreationPolicies: CEL constraints over `trigger` (the object) — and,
// for claims, `user` and `requestInfo` — and templates whose `{{ CEL }}`
// segments render a ResourceClaim or ResourceGrant: metadata, consumer,
// dimensions and amounts computed from the object.
//
// Compiling judges a policy as its Ready condition reports it: every
// expression compiles, literals are what the API server accepts, and, with
// `trigger` typed from the trigger kind's schema, no expression's estimated
// cost exceeds EstimatedCostLimit. Errors name the exact field path.
//
// It has no client and no I/O: the engine and the grant controller compile
// to report Ready, admission compiles once per policy generation and
// evaluates per request. Package triggerschema finds trigger kinds' schemas.
package policy
