// Package quotaclaim is the claim library for owning services: the
// controllers behind their own APIs (compute, networking, storage) that take
// quota for a resource a user asks for by creating a ResourceClaim, provision
// only once it is Granted, keep the resource waiting (not refused) while it is
// Denied, and release the claim when the resource goes (docs/owning-services.md).
//
// A Claimer keeps one claim per owner (the service's object), named from the
// owner's UID, so a retry or a crash between any two steps never makes two:
//
//	c := &quotaclaim.Claimer{Client: quota, Namespace: "compute-claims", Service: "compute", Identity: me}
//	st, err := c.Ensure(ctx, quotaclaim.OwnerOf(instance, gvk), consumer, requests)
//	quotaclaim.SetCondition(&instance.Status.Conditions, instance.Generation, st)
//	if st.Phase == quotaclaim.Granted { provision() }
//	...
//	c.Release(ctx, owner) // when the instance is deleted
//
// An existing claim of the owner's name is adopted only when the server says
// this service's identity created it (the annotation quota.miloapis.com/creator,
// written by the API server from the request's user, never by a client) and
// it claims the same consumer, object and amounts: a tenant cannot squat the
// name. It works against the root, a project's control plane, and a cluster
// where quotaplane controller runs; only the client's URL differs.
package quotaclaim
