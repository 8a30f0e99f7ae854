// Package claimauthz owns the one check that says whether a user may charge a
// consumer's quota: verb "claim" on the consumer, by name
// (docs/authorization.md). Both admission plugins that let a user's request
// charge a consumer ask it: claimguard for ResourceClaims created through the
// API, claimpolicy for the claims a ClaimCreationPolicy renders.
//
// It only asks the authorizer it is given; it never reads or writes objects
// and holds no quota logic.
package claimauthz
