// Package setup prints what an operator applies to make a cluster a member
// of the quota plane (docs/clusters.md): the member's
// ValidatingWebhookConfiguration (`quotaplane webhook print-config`) and the
// quota plane's namespace and bindings that tie the webhook's identity to
// that one cluster (`quotaplane webhook print-rbac`). It reads the quota
// plane's policies; it never writes.
package setup
