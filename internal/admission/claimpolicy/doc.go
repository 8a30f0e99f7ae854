// Package claimpolicy is the admission plugin of quotaplane serve that
// enforces ClaimCreationPolicies: for each create of a kind a policy in
// force names, it renders the policy's ResourceClaim and asks the in-process
// quota engine to decide it before the object is stored.
//
// It decides nothing itself: the engine decides, internal/policy evaluates
// the CEL. Its job is to choose the version of each policy in force, check
// what the policy renders exactly as the API server would check a claim, and
// turn the outcome into the right answer: 403 for a quota denial or a
// consumer the requester may not charge, 409 for a claim name that is taken,
// 504 when the engine cannot decide in time, and a refusal naming the policy
// when a policy cannot be evaluated for the object.
package claimpolicy
