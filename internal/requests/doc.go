// Package requests is the quota request controller: it carries each
// QuotaRequest from Pending to Approved, Denied or Withdrawn (docs/self-service.md).
//
// A request is seen (the bucket's numbers then are recorded), decided (by
// staff through the status subresource, by a QuotaApprovalRule, or at once
// for a decrease) and applied: an increase is a ResourceGrant for the
// difference, named after the request and labelled with it; a decrease
// lowers the grants of earlier requests, newest first. The grant is for the
// consumer, resource type and dimensions the decision recorded, never the
// spec as it is when the grant is written. Each step is written
// to the request's status, with its resourceVersion, before the next is
// taken, and every write that follows is idempotent (a grant created under
// the request's name, amounts set rather than added), so a crash or a lost
// leadership between two steps never grants twice.
//
// It reads its keys from informers and everything it decides with (the
// bucket, earlier requests' grants) live from the API server; one worker
// applies one request at a time. It never computes a limit: the current
// limit is the AllowanceBucket's, taken only once the bucket shows every
// grant earlier requests made; the arithmetic is internal/quota's
// PlanLimitChange.
package requests
