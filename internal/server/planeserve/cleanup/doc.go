// Package cleanup removes the control plane of an Organization or Project
// being deleted: every key under the plane's etcd prefix, confirmed gone,
// then the claims of the plane's objects, whose objects went with it
// (docs/control-planes.md, docs/exactly-once.md "Plane removal"). At start it
// sweeps the data of owners deleted while the server was down. It writes no
// API object but those claims' deletions, through the API.
package cleanup
