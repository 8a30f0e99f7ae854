// Package claimcreator is the admission plugin of quotaplane serve that
// records who created each ResourceClaim: on create it writes the request's
// user name into the annotation quota.miloapis.com/creator, replacing
// whatever the client sent; on update it keeps the stored value, so nobody
// changes it afterwards. Owning services adopt an existing claim only when
// it names their own identity (pkg/quotaclaim): a tenant who creates a
// claim under a service's name first cannot have it taken for the
// service's. It runs after the mutating webhooks, so it has the last word.
package claimcreator
