// Package walk evaluates one version of a ClaimCreationPolicy on every object
// of its trigger kind that exists — at the root and in every served control
// plane that stores its own — rendering each object's claim as its create
// would be rendered (charge.RenderClaim: the same checks, in the same order),
// and charging nothing. The existing-object charger (internal/engine/existing)
// charges what it finds; Preview sums it, per bucket, into what the policy
// would do if it came into force: a trial generation's status.impact and
// `quotaplane what-if --policy` (docs/admission.md, "Rolling out a policy").
package walk
