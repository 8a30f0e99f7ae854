// Package memberserve decides, inside quotaplane serve, the quota of
// creates and updates in member clusters: `quotaplane webhook` in a member
// cluster posts each AdmissionReview to ReviewPath(cluster), and the
// Reviewer runs the server's own ClaimCreationPolicy plugin on it — the same
// rendering, authorization of the requester, all-or-nothing decision and
// fenced journal as a request to serve itself — with the claims placed in the
// cluster's namespace and labelled with its name (docs/clusters.md).
//
// The quota plane, not the webhook, decides what a member may say: the
// poster must be allowed verb review on the cluster (members.Access), and
// the review's requester is stripped of the quota plane's own names
// (system: users and groups) and of quotaplane's extras before anything is
// decided.
//
// The server cannot read a member cluster's objects, so a granted create is
// settled as stored at once (its claim written); the cluster's webhook
// releases the claim of an object that never appeared there, and charges an
// object that appeared without one.
package memberserve
