// Package portal is quotaplane's web portal (docs/self-service.md): the
// tenant view (an organization's limits, usage, claims, refusals and
// quota requests) and the staff view (every organization by how close it
// is to its limits, pending requests to approve or deny).
//
// The pages (web/, embedded; Preact and htm vendored, no build step) call
// the Kubernetes API as the signed-in user, with the bearer token the user
// gives, so RBAC decides what each person sees and may do. This package
// adds what the API cannot answer cheaply, each call authenticated and
// authorized as that user before anything is read:
//
//   - /portal/api/whoami: who the token is (a SelfSubjectReview), whether
//     it is staff (may list AllowanceBuckets everywhere), and the
//     organizations whose quota it may read;
//   - /portal/api/overview: staff only, every organization sorted by how
//     close it is to a limit, then by the soonest estimated exhaustion;
//   - /portal/api/events: staff only, a stream saying "changed" when
//     buckets or requests change;
//   - /portal/api/history: an organization's recent refusals, from the
//     decision history, for whoever may read that organization's quota.
//
// Those answers come from informers the portal runs with its own
// (privileged) identity; it never writes anything. quotaplane serve serves
// the portal at /portal/ before authentication (the pages are public; every
// answer is authorized per user); `quotaplane portal` serves it next to
// `quotaplane controller`, proxying /api and /apis to the cluster with the
// user's own token. Every answer under /portal/ carries the portal's
// Content-Security-Policy (its own origin only, the page's inline import map
// by hash, never framed) and Referrer-Policy: no-referrer (headers.go).
package portal
