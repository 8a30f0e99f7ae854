// Package kinds finds the version at which a resource's objects can be read
// now. A claim records its object as resource.version.group at the time of
// the create; the platform may stop serving that version later (v2 becomes
// the storage version, v1 is marked served: false), and the object is still
// the same object, at the same UID, under every served version. Everything
// that looks a claim's object up goes through a Resolver, so that an
// unserved version never reads as "the object is gone" and releases the
// quota of an object that exists.
//
// It reads CustomResourceDefinitions through the API (cached briefly); it
// never writes, and never decides whether an object exists: its callers read
// the object at the version it returns.
//
// It is also the one place that knows what a CustomResourceDefinition says
// of its resource apart from versions: its name, <plural>.<group> (CRDName,
// CRDGroup), and where objects keep the replica count their scale
// subresource sets (ScaleReplicasPath). Those are pure: they read no API.
package kinds
