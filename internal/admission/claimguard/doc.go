// Package claimguard is the admission plugin of quotaplane serve that keeps
// the quota records honest against their own API:
//
//   - a ResourceClaim created through the API may name a consumer only when
//     its creator may charge that consumer (verb "claim" on it);
//   - a claim's status (its decision) is written by the quota engine only, so
//     a Granted status nobody decided cannot be stored;
//   - a claim made at admission cannot be deleted, or cut from its object
//     (its ownerReference or the annotations that name the object removed),
//     while its object exists, by anyone but the garbage collector and the
//     engine — the refusal names the object that holds it;
//   - the engine's decision ledger (its fence) and the key sealing its
//     decisions cannot be deleted or edited by anyone but the engine;
//   - no namespace deletion releases the quota of an object outside that
//     namespace: deleting a namespace that holds the claims of objects living
//     elsewhere is refused, naming them, and a namespace already terminating
//     keeps such a claim (the namespace controller's delete is refused, so
//     the namespace stays Terminating with a condition saying why) until its
//     object is gone.
//
// The garbage collector, the namespace controller and the quota engine run
// inside serve and reach the API as the server's own loopback user; that user
// is the only one these rules let through, but for the claims of objects
// living elsewhere.
//
// It only reads (a claim's object, live, to see whether it still exists); it
// never writes anything, and it never decides quota.
package claimguard
