// Package charge is the charging component: the one place that decides
// what an object costs and asks the engine for it. Admission of creates and
// updates (internal/admission/claimpolicy), QuotaReview
// (internal/server/quotareview), member clusters' reviews
// (internal/server/memberserve), the claim library's Check
// (internal/admission/claimcreator) and the authorization of claims created
// through the API (internal/admission/claimguard) call it; none of them
// assembles the steps itself. A new way in is one more caller, with a Mode.
//
// # The steps, in this order (a contract)
//
//  1. Where the object is and who asks. The requester is the identity the
//     quota plane decided before the call: the authenticated user at the
//     root and in a control plane; for a member cluster's review, the
//     cluster's names mapped by memberserve (C:<name>), never the names a
//     poster sent. The place (root, a plane, a member cluster) is read from
//     the context. Objects no policy may charge (governed.Exemptions) end
//     here, charged nothing; a claim created in a plane that names a
//     consumer the plane may not charge is refused here.
//  2. The policies that match: the version of each ClaimCreationPolicy in
//     force for the kind, scoped by namespace, and the versions on trial
//     (mode Warn or Audit, trial.go), which run steps 3 to 5 charging
//     nothing: evaluated and rendered, their consumers authorized (a
//     refusal refuses the request, in every mode), the engine asked what
//     enforcing would do (route.Handle.Review, taking nothing), and the
//     answer recorded (a warning in Warn, an audit annotation, the metric
//     by mode) — before the versions in force are charged.
//  3. Render: each policy's constraints and claim template on the object
//     as the client sent it; a policy that cannot be evaluated refuses the
//     request, never stores it uncharged. Each rendered claim is checked
//     as the API server would check it.
//  4. Authorization of every consumer: the requester must be allowed verb
//     "claim" on each consumer a rendered claim names (claimauthz), before
//     anything about its quota is read. Only Existing mode (an object a
//     member cluster stores already, no requester) skips it.
//  5. Decide: the engine decides all the object's claims at once, on this
//     replica when it leads, else through the leader (admit.Handle). Review
//     mode stops before this step and returns what would be asked (Step);
//     the review asks for all its objects at once (Decide).
//  6. Record: a granted create is held until its object is stored
//     (admit's RequestGrants, settled by the engine); a refusal is written
//     to the history and counted; a fail-open admission (every policy
//     failurePolicy: Ignore, the engine unable to decide) is recorded
//     before it is admitted, or refused.
//
// A claim created through the API runs the same steps with its own
// rendering (claim.go): where (1), authorization (4), decision (5).
//
// The existing-object charger (internal/engine/existing) charges objects
// stored before a policy came into force, on the leader, with no requester:
// it renders each through RenderClaim (step 3, the same checks in the same
// order; internal/charge/walk lists and renders) and asks the leader's term
// directly (admit.Term.ChargeExisting), since it runs where the engine
// leads and charges what is already stored. A trial's status.impact and a
// policy preview (QuotaReview spec.policy) walk the same way and charge
// nothing.
// quotaplane verify only reads: it evaluates policies with the same
// compiler (internal/policy) to say what is missing, and charges nothing.
//
// No step reads a number before step 4 has passed: a dry run, a review or
// a Check by a requester who may not charge a consumer learns nothing of
// its quota.
package charge
