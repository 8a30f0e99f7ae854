// Package quotarequest is serve's admission plugin for QuotaRequests
// (docs/self-service.md):
//
//   - at create, it records who asked in the annotation
//     quota.miloapis.com/requested-by, replacing whatever the client sent,
//     and keeps it through updates;
//   - it refuses a request that can never be met, on the exact field: one
//     outside an organization's namespace, for a consumer that is not that
//     organization or one of its projects, or for a resource type not
//     registered for that consumer's kind;
//   - when a decision is written through the status subresource, it records
//     who decided and when (status.decision.decidedBy, decidedAt) and what
//     (consumerRef, resourceType and dimensions, from the stored spec), and
//     refuses a decision by the user who asked;
//   - it reserves the grants of requests (named quota-request-* or labelled
//     quota.miloapis.com/quota-request) to serve's own identity, which the
//     request controller uses: anyone else creating, changing or deleting
//     one is refused with a 403.
//
// Who may decide is RBAC's: update on quotarequests/status, which the
// tenant roles do not hold. The schema keeps a request's spec (but
// withdrawn) immutable from create, and its decision once made. The plugin reads Projects and ResourceRegistrations;
// it writes nothing but the object under admission.
package quotarequest
