// Package quotareview answers QuotaReviews in serve: a set of objects
// reviewed as applying them one by one, in order, would be admitted, taking
// nothing (docs/what-if.md).
//
// Each object goes through what its create (or, when it exists, its update)
// would: the reviewed user's RBAC on it, then the charging component's steps
// (internal/charge: exemptions, policies, rendering, the claim's checks, the
// consumer's authorization) in Review mode, stopped at the question to the
// engine; a ResourceClaim named in the review goes through charge.ReviewClaim.
// The component then asks the engine for every object's claims at once, in
// order (charge.Charger.Decide, on the leader or forwarded to it), which
// decides them on its cache and forgets them.
//
// It never writes: objects that exist are read through the server's
// loopback, and only once the reviewed user may read them.
package quotareview
