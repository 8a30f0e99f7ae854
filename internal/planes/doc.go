// Package planes names the control planes serve keeps for each Organization
// and Project (docs/control-planes.md): a Plane, the URL path it is served
// at and the non-resource paths it serves (Serves), the request context that
// carries it, the etcd key prefix its objects live under, the namespace at
// the root where its quota objects are kept, and clients that talk to a
// plane through its URL. It holds no state of a plane and never writes.
package planes
