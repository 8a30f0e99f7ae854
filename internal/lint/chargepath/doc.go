// Package chargepath is the analyzer that holds the charging path's
// boundary (internal/charge's doc.go): the steps that take quota are asked
// through the charging component, and nowhere else.
//
//   - Only internal/charge imports internal/admission/claimauthz, the check
//     that a requester may charge a consumer: every way in authorizes
//     through the component, in its place among the steps.
//   - Only internal/charge imports internal/policy/claims, the renderer
//     that makes a policy's claim for an object: the existing-object
//     charger renders through charge.RenderClaim, with admission's checks
//     in admission's order.
//   - Only internal/charge calls the engine's entry points that decide a
//     charge or a review (route.Handle's DecideCreate, DecideUpdate and
//     Review; a delegated grant's budget, DecideBudget, is its admission's). internal/engine/route defines them, and
//     internal/peer calls them on the leader for a follower's forwarded
//     request, which the follower's charging component sent.
//   - Neither internal/charge nor internal/peer imports the local-decision
//     package, internal/engine/admit: they ask through internal/engine/route,
//     which takes a decision to where it is made.
//
// internal/layout runs it over the whole module; its tests hold each
// pattern it refuses.
package chargepath
