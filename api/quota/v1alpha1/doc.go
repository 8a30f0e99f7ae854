// Package v1alpha1 holds the quota.miloapis.com/v1alpha1 API: the six kinds a
// platform uses to register quotable resources, grant quota to consumers,
// claim it, read live allowances, and automate grants and claims.
//
// This package depends only on apimachinery so that any program can import it.
// Field names follow the seed design documents exactly, so manifests written
// for that design apply unchanged.
//
// +kubebuilder:object:generate=true
// +groupName=quota.miloapis.com
package v1alpha1
