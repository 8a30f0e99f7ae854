// Package verify audits a live quota plane the way fsck audits a disk: it
// reads everything the plane stores, rebuilds the quota engine's state from it
// exactly as a new engine leader does, and reports where storage disagrees
// with itself — a governed object without its claim, a claim for an object
// that is gone, a bucket whose numbers are not its grants and claims, a grant
// held in flight past its deadline — with what would repair each. Objects
// admitted fail-open are listed apart: they are a policy's choice, not damage.
//
// It only reads: paged lists through the API, range reads in etcd. It must
// never write, never take the engine's Lease or stamp its ledger, and never
// keep whole objects: what it keeps per object is a few strings, and the
// arithmetic is internal/quota's, fed the way internal/engine feeds it.
// docs/verify.md says what each check means.
package verify
