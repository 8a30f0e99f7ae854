// Package grantpolicy is the grant engine: it keeps, for every Ready
// GrantCreationPolicy and every object of the policy's trigger kind whose
// constraints hold, exactly one ResourceGrant rendered from the policy's
// template, and removes that grant when the object changes so that the
// constraints stop holding, when the object or the policy is deleted, or
// when the template is edited to render another grant.
//
// It owns:
//   - the Ready and GrantsSynced conditions and observedGeneration of
//     GrantCreationPolicies, and their cleanup finalizer;
//   - the ResourceGrants labelled quota.miloapis.com/grant-policy, which it
//     finds again by label (never from memory alone), so that a restart or
//     a new leader converges on the same grants;
//   - one shared watch per trigger kind, started when the first Ready policy
//     needs it and stopped when the last one goes (package triggerwatch).
//
// What grant a policy wants for one object, and the labels by which it is
// found again, is computed as values by package render; the policies'
// state metrics are written by package statemetrics from this engine's
// cache. The labels, annotations and finalizer are the API's
// (quotav1alpha1.GrantPolicyLabel and the names after it).
//
// Exactly one replica acts at a time (a Lease in the system namespace), and
// it writes only through the API server. It must never compute quota
// numbers, decide claims or write a grant's status: the quota engine makes
// the grants it creates Active and fills the buckets. It must never write a
// grant outside the namespace its template names, and never overwrite a
// grant it did not make for the same policy and trigger object.
package grantpolicy
