// Package status holds the engine's status writers, each a reconciler with
// its own queue in the term that runs it and its dependencies injected as
// function fields (so table tests need no server): ClaimWriter writes each
// claim's decision, BucketWriter each AllowanceBucket (placed by Placement,
// with its ApproachingLimit threshold condition and Events), and
// ConditionWriter the Active conditions of grants and registrations and the
// Ready condition of ClaimCreationPolicies.
//
// Writers only render what internal/quota computed (the accounts' numbers,
// a bucket's threshold level); they make no decision, and write only
// statuses and AllowanceBuckets, never a claim's spec or a grant.
package status
