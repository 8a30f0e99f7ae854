// Package webhook is `quotaplane webhook`: a ValidatingAdmissionWebhook
// server that enforces the quota plane's ClaimCreationPolicies in a member
// cluster (docs/clusters.md).
//
// Each create, update or scale of a governed kind is posted to the quota
// plane (internal/server/memberserve), which decides it exactly as serve
// decides its own requests; the answer is passed back. The webhook keeps the
// quota plane's claims true to the cluster: it releases the claims of
// objects deleted here (its watch of governed kinds), and its reconcile
// releases claims whose objects never appeared and charges objects created
// while it was bypassed or down, saying so. It keeps no state of its own:
// claims live in the quota plane, so a restart or a second replica loses and
// changes nothing. Its quota-plane token, when a service account's, is
// refreshed and kept in the cluster's kubeconfig Secret by package
// credential.
package webhook
