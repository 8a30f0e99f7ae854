// Package quotareview answers QuotaReviews in serve: a set of objects
// reviewed as applying them one by one, in order, would be admitted, taking
// nothing (docs/what-if.md).
//
// Each object goes through what its create (or, when it exists, its update)
// would: the reviewed user's RBAC on it, then the server's own
// ClaimCreationPolicy plugin — exemptions, scoping, rendering, the claim's
// checks, the consumer's authorization — stopped at the question to the
// engine (claimpolicy.WithReview). The engine then decides every object's
// claims at once, in order, on its cache (admit.Handle.Review, on the leader
// or forwarded to it), and forgets them.
//
// It never writes: objects that exist are read through the server's
// loopback, and only once the reviewed user may read them.
package quotareview
