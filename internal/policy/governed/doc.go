// Package governed decides what a ClaimCreationPolicy may charge, for every
// place that charges: serve's admission (creates, updates, member clusters'
// reviews), the engine's charging of existing objects, and verify's audit.
// Two decisions live here, so that they never differ between those places:
// which objects are exempt (quotaplane's own records, the cluster's system
// namespaces, Events: by namespace and kind, never by who writes), and
// which consumers an object stored in a control plane may be charged to
// (PlaneConsumer: never a kind each plane stores for itself).
//
// It decides nothing about quota amounts, and reads nothing.
package governed
