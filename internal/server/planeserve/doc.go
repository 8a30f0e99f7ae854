// Package planeserve serves the control plane of every Organization and
// Project inside serve (docs/control-planes.md). A request to
// /apis/resourcemanager.miloapis.com/v1alpha1/{organizations|projects}/<name>/control-plane/...
// has the prefix stripped and its plane put into the request's context
// (Outer, before every filter; a path a plane does not serve, such as the
// root's /metrics, is 404 there); the authorizer lets in only who may use
// the plane (Authorizer); once authorized, the plane is resolved to its Ready
// owner and prepared on first use (Inner, Registry); the storage of every
// resource routes the request (Storage): a plane's own objects under the
// plane's etcd key prefix, the platform's kinds shared read-only (the
// quota group's tenant-private and staff's kinds not at all), a plane's
// claims, grants and buckets to its quota namespace at the root, the
// projects of an organization's plane to the root's, filtered. Cleaner
// removes a deleted owner's plane data and, once none is left, releases
// the claims of its objects. The admission plugins that read
// the root's objects are made plane-aware by AdmissionDecorator.
package planeserve
