// Package claimcreator is the admission plugin of quotaplane serve that
// records who created each ResourceClaim: on create it writes the request's
// user name into the annotation quota.miloapis.com/creator, replacing
// whatever the client sent; on update it keeps the stored value, so nobody
// changes it afterwards. Owning services adopt an existing claim only when
// it names their own identity (pkg/quotaclaim): a tenant who creates a
// claim under a service's name first cannot have it taken for the
// service's. It runs after the mutating webhooks, so it has the last word.
//
// With the engine in-process, it also answers a dry-run create of a claim
// with the decision the engine would make now, taking nothing (Validate):
// the claim library's Check.
package claimcreator
