// Package v1alpha1 holds the resourcemanager.miloapis.com/v1alpha1 API: the
// tenants quota is given to. An Organization is a tenant with a namespace of
// its own (organization-<name>) where its grants, claims and buckets live; a
// Project belongs to one Organization and charges its quota.
//
// This package depends only on apimachinery so that any program can import it.
// docs/tenancy.md says what each kind gets and how it is deleted.
//
// +kubebuilder:object:generate=true
// +groupName=resourcemanager.miloapis.com
package v1alpha1
