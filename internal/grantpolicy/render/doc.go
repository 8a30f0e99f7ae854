// Package render computes, as values, the ResourceGrant a
// GrantCreationPolicy wants for one trigger object: its name, namespace,
// spec, and the labels and annotations by which the grant engine finds it
// again; and which of the grants already made for that object to keep.
//
// It must never hold a client, an informer, a clock or any I/O, and never
// decide whether a policy is Ready: package grantpolicy judges policies,
// reads the objects and writes what this package computes.
package render
