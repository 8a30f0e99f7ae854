// Package claimguard is the admission plugin of quotaplane serve that keeps
// the quota records honest against their own API:
//
//   - a ResourceClaim created through the API may name a consumer only when
//     its creator may charge that consumer (verb "claim" on it), and may
//     carry a member cluster's label only when its creator may speak for
//     that cluster (verb "review" on it);
//   - a claim's status (its decision) is written by the quota engine only, so
//     a Granted status nobody decided cannot be stored;
//   - one guard for every claim made for an object: it cannot be deleted,
//     nor cut from its object (its ownerReferences, resourceRef, requests,
//     consumer, the annotations that name the object, the finalizers of a
//     claim being deleted), while the object is stored where it lives — at
//     the root, or in the control plane its mark names (read through the
//     plane; a plane whose owner is gone or being deleted holds nothing) —
//     whoever asks: users, system:masters, and serve's own garbage
//     collector, namespace controller and quota engine. Their releases pass
//     because they come once the object is gone. The refusal names the
//     object and where it is stored;
//   - a member cluster's claim (its object cannot be looked up from here) is
//     deleted, or cut, only by whoever may release that cluster's claims
//     (verb "release" on the virtual resource clusters, internal/members);
//   - the marks saying where a claim's object is stored (the control-plane
//     annotation, the member-cluster label) are the engine's, written with
//     the claim: no update adds, changes or removes them;
//   - the engine's decision ledger (its fence) and the key sealing its
//     decisions cannot be deleted or edited by anyone but the engine;
//   - no namespace deletion releases the quota of an object outside that
//     namespace: deleting a namespace that holds the claims of live objects
//     living elsewhere (another namespace, a control plane), or of member
//     clusters the requester may not release, is refused, naming them; a
//     namespace already terminating keeps such a claim (the namespace
//     controller's delete is refused, so the namespace stays Terminating
//     with a condition saying why) until its object is gone.
//
// The decisions are in decide.go, on values; the plugin gathers what they
// need (the claims, the object looked up, the authorizer's answers).
//
// It only reads (a claim's object, live, where it is stored; a plane's
// owner); it never writes anything, and it never decides quota.
package claimguard
